# code version: xdpx ae43b9ca2ecdc91588d690b5878d6dd0ab30d584 in /work/legacy
# code version: working directory 8533cbb406428093c4d36158a4b6ca0c34642f7e (dirty) in /work/main
{
    'train': {
        'user_dir': None,
        'data_dir': 'data/retrieval_words',  # *
        'save_dir': 'runs/bi_encoder',  # *
        'overwrite': False,
        'auto_suffix': False,
        'resume': False,
        'train_subset': 'train',
        'exclude_valid_from_train': False,
        'lazy_load': False,
        'seed': 1,
        'max_epoch': None,
        'max_update': 8,  # *
        'train_steps': 6,  # *
        'batch_size': 16,  # *
        'update_freq': 1,
        'auto_ga': False,
        'learning_rate': 0.001,  # *
        'clip_norm': 5.0,
        'cpu': False,
        'max_loss': None,
        'ema_decay': None,
        'distributed_world_size': None,
        'use_bmuf': False,
        'fsdp': False,
        'fp16': False,
        'bf16': False,
        'fp16_backend': 'fairseq',
        'opt_level': 'O1',
        'memory_efficient_fp16': False,
        'compile': False,
        'log_interval': 3,  # *
        'log_file': 'log.txt',
        'eval_interval': 6,  # *
        'eval_per_epoch': False,
        'max_eval_steps': None,
        'eval_interval_warmup': 0,
        'eval_interval_warmup_multiplier': 6,
        'valid_subset': 'dev',
        'viz': False,  # *
        'inspect_gradient': False,
        'tensorboard': False,
        'major_metric': 'mrr',  # *
        'ascending_metric': True,
        'tolerance': None,
        'min_steps': 0,
        'save': True,
        'save_best_only': True,  # *
        'save_above_score': None,
        'save_full_checkpoint': False,
        'save_last_only': True,  # *
        'keep_last_checkpoints': None,
        'keep_best_checkpoints': None,
        'pretrained_model': None,
        'task': 'default',
        'model': 'bi_encoder',  # *
        'loss': 'info_nce',  # *
        'optimizer': 'adam',
        'lr_scheduler': 'constant',
        'callbacks': [],
        'processor': 'bi_encoder',  # *
        'tokenizer': 'space',  # *
        'loader': 'pair',  # *
        'parser': 'tsv',  # *
        'max_len': 64,  # *
        'min_len': 1,
        'pad_word': '[PAD]',  # *
        'unk_word': '[UNK]',  # *
        'lower': True,
        'target_type': 'regression',  # *
        'target_unk': None,
        'vocab_size': 116,  # *
        'pad_index': 0,  # *
        'unk_index': 1,  # *
        'cls_index': None,
        'sep_index': None,
        'mask_index': None,
        'num_classes': 1,  # *
        'special_targets': None,
        'data_size': {'train': 160, 'dev': 60, 'test': 60},  # *
        'format_version': 1,  # *
        'fingerprint': {'options': 'b2d90293a0f02aac', 'train': '70b3b93b995d42f8', 'dev': '84f26725b628aeeb', 'test': '245bb26089eb5b7a'},  # *
        'valid_batch_size': 16,
    },
    'model: bi_encoder': {
        'embedding_dim': 8,  # *
        'embedding_file': None,
        'fix_embeddings': False,
        'dropout': 0.1,  # *
        'hidden_size': 8,  # *
        'embedding_size': 8,  # *
        'pooling': 'max',
        'normalize': True,
    },
    'loss: info_nce': {
        'temperature': 0.05,
        'symmetric': False,
        'recall_at': [1, 10],
    },
    'optimizer: adam': {
        'adam_betas': [0.9, 0.999],
        'adam_eps': 1e-06,
        'weight_decay': 0.0,
        'adam_implementation': 'fused',
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
