{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/ner/data',  # *
        'data_files': '*.conll',  # *
        'data_dir': 'data/ner_char',  # *
        'vocab_file': None,
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'ner',  # *
        'tokenizer': 'char',  # *
        'loader': 'ner',  # *
        'parser': 'conll',  # *
        'max_len': 32,  # *
        'min_len': 1,
        'lower': False,  # *
        'target_type': 'text',
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'threshold': 3,  # *
        'ignore_in_emb': True,
        'nwords': -1,
        'special_targets': [],
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
    },
    'loader: ner': {
        'tag_scheme': 'bio',
        'tag_unit': 'char',  # *
    },
}
