{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/reviews',  # *
        'data_files': '*.txt',
        'data_dir': 'data/multilabel_char',  # *
        'vocab_file': None,
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'single',  # *
        'tokenizer': 'char_zh',  # *
        'loader': 'single',  # *
        'parser': 'csv',
        'max_len': 48,  # *
        'min_len': 1,
        'lower': True,
        'target_type': 'multilabel',  # *
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'threshold': 3,  # *
        'ignore_in_emb': True,
        'nwords': -1,
        'special_targets': [],
        'label_separator': '|',
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
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
