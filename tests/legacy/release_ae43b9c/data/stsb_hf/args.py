{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/data/sample/stsb',  # *
        'data_files': '*.tsv',  # *
        'data_dir': 'data/stsb_hf',  # *
        'vocab_file': None,
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'hf_pair',  # *
        'tokenizer': 'auto',  # *
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
