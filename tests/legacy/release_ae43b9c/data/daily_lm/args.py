{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/peoples_daily',  # *
        'data_files': '*.txt',
        'data_dir': 'data/daily_lm',  # *
        'vocab_file': 'vocab.txt',  # *
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'bert_lm',  # *
        'tokenizer': 'bert',  # *
        'loader': 'corpus',  # *
        'parser': 'csv',
        'max_len': 32,  # *
        'min_len': 1,
        'lower': True,
        'target_type': 'text',
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'special_targets': [],
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
    },
    'processor: bert_lm': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
        'mask_word': '[MASK]',
        'mask_prob': 0.15,
        'random_token_prob': 0.1,
        'leave_unmasked_prob': 0.1,
        'mask_whole_words': False,
    },
    'tokenizer: bert': {
        'strip_accents': None,
        'fast_chinese': True,
    },
    'loader: corpus': {
        'break_mode': 'complete',
    },
    'parser: csv': {
        'delimiter': '\t',
        'quotechar': None,
    },
}
