{
    'prepro': {
        'user_dir': None,
        'data_source': '/work/main/examples/retrieval/data',  # *
        'data_files': {'train.tsv': 'train', 'dev.tsv': 'dev', 'test.tsv': 'test'},  # *
        'data_dir': 'data/retrieval_bert',  # *
        'vocab_file': None,
        'target_map_file': None,
        'pretrained_embeddings': None,
        'log_file': 'log.txt',
        'workers': 1,
        'seed': 1,
        'processor': 'bert_bi_encoder',  # *
        'tokenizer': 'space',  # *
        'loader': 'pair',  # *
        'parser': 'tsv',  # *
        'max_len': 64,  # *
        'min_len': 1,
        'lower': True,
        'target_type': 'regression',  # *
        'target_unk': None,
        'remove_duplicate': False,
        'skip_bad_lines': False,
        'start_line': 0,
        'threshold': 2,  # *
        'ignore_in_emb': True,
        'nwords': -1,
        'special_targets': [],
        'pad_word': '[PAD]',
        'unk_word': '[UNK]',
    },
    'processor: bert_bi_encoder': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
    },
    'loader: pair': {
        'text1_column': 0,
        'text2_column': 1,
        'label_column': -1,
        'extra_columns': False,
    },
    'parser: tsv': {
        'quotechar': None,
    },
}
