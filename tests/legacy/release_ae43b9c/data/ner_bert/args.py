{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/ner/data',  # *
        'data_files': '*.conll',  # *
        'data_dir': 'data/ner_bert',  # *
        'vocab_file': 'vocab.txt',  # *
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'bert_ner',  # *
        'tokenizer': 'bert',  # *
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
        'special_targets': [],
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
    },
    'processor: bert_ner': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
    },
    'tokenizer: bert': {
        'strip_accents': None,
        'fast_chinese': True,
    },
    'loader: ner': {
        'tag_scheme': 'bio',
        'tag_unit': 'char',  # *
    },
}
