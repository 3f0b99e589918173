{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/stsb',  # *
        'data_files': '*.tsv',  # *
        'data_dir': 'data/stsb_bert',  # *
        'vocab_file': 'vocab.txt',  # *
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'bert_pair',  # *
        'tokenizer': 'bert',  # *
        'loader': 'pair',  # *
        'parser': 'csv',
        'max_len': 48,  # *
        'min_len': 1,
        'lower': True,
        'target_type': 'regression',  # *
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'special_targets': [],
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
    },
    'processor: bert_pair': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
    },
    'tokenizer: bert': {
        'strip_accents': None,
        'fast_chinese': True,
    },
    'loader: pair': {
        'text1_column': 5,  # *
        'text2_column': 6,  # *
        'label_column': 4,  # *
        'extra_columns': True,  # *
    },
    'parser: csv': {
        'delimiter': '\t',
        'quotechar': None,
    },
}
