{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/reviews',  # *
        'data_files': '*.txt',
        'data_dir': 'data/reviews_bert',  # *
        'vocab_file': 'vocab.txt',  # *
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'bert_single',  # *
        'tokenizer': 'bert',  # *
        'loader': 'single',  # *
        'parser': 'csv',
        'max_len': 48,  # *
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
    'processor: bert_single': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
    },
    'tokenizer: bert': {
        'strip_accents': None,
        'fast_chinese': True,
    },
    'loader: single': {
        'text_column': 0,
        'label_column': -1,
        'extra_columns': False,
    },
    'parser: csv': {
        'delimiter': '\t',
        'quotechar': None,
    },
}
