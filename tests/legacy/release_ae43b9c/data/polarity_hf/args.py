{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/polarity',  # *
        'data_files': '*.txt',
        'data_dir': 'data/polarity_hf',  # *
        'vocab_file': None,
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'hf_single',  # *
        'tokenizer': 'auto',  # *
        'loader': 'single',  # *
        'parser': 'csv',
        'max_len': 40,  # *
        'min_len': 1,
        'lower': True,
        'target_type': 'text',
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'threshold': -1,
        'ignore_in_emb': True,
        'nwords': -1,
        'special_targets': [],
        'pad_word': '<pad>',
        'unk_word': '<unk>',
    },
    'tokenizer: auto': {
        'tokenizer_dir': 'models/roberta',  # *
    },
    'loader: single': {
        'text_column': 1,  # *
        'label_column': 0,  # *
        'extra_columns': False,
    },
    'parser: csv': {
        'delimiter': '\t',
        'quotechar': None,
    },
}
