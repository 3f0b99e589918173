# code version: xdpx ae43b9ca2ecdc91588d690b5878d6dd0ab30d584 in /work/legacy
# code version: working directory 8533cbb406428093c4d36158a4b6ca0c34642f7e (dirty) in /work/main
{
    'train': {
        'user_dir': None,
        'data_dir': 'data/polarity_hf',  # *
        'save_dir': 'runs/hf_classification',  # *
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
        'major_metric': 'accuracy',  # *
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
        'pretrained_model': 'models/roberta',  # *
        'task': 'default',
        'model': 'hf_classification',  # *
        'loss': 'cross_entropy',  # *
        'optimizer': 'adam',
        'lr_scheduler': 'constant',
        'callbacks': [],
        'processor': 'hf_single',  # *
        'tokenizer': 'auto',  # *
        'loader': 'single',  # *
        'parser': 'csv',
        'max_len': 40,  # *
        'min_len': 1,
        'pad_word': '<pad>',  # *
        'unk_word': '<unk>',  # *
        'lower': True,
        'target_type': 'text',
        'target_unk': None,
        'vocab_size': 300,  # *
        'pad_index': 0,  # *
        'unk_index': 1,  # *
        'cls_index': None,
        'sep_index': None,
        'mask_index': None,
        'num_classes': 2,  # *
        'special_targets': None,
        'data_size': {'dev': 60, 'test': 60, 'train': 240},  # *
        'format_version': 1,  # *
        'fingerprint': {'options': '4f49025305ce24b1', 'dev': '59062ad87f2473e9', 'test': 'b7808f9aecca978c', 'train': '648c2b8f56009dbc'},  # *
        'valid_batch_size': 16,
    },
    'model: hf_classification': {
        'classifier_dropout': None,
        'attn_implementation': 'auto',
        'gradient_checkpointing': False,
        'freeze_embeddings': False,
        'freeze_layers': 0,
        'layer_lr_decay': 1.0,
        'head_lr_multiplier': 1.0,
        'lora': None,
        'hf_config': {'add_cross_attention': False, 'attention_probs_dropout_prob': 0.1, 'bos_token_id': 2, 'classifier_dropout': None, 'eos_token_id': 3, 'hidden_act': 'gelu', 'hidden_dropout_prob': 0.1, 'hidden_size': 8, 'initializer_range': 0.02, 'intermediate_size': 16, 'is_decoder': False, 'layer_norm_eps': 1e-12, 'max_position_embeddings': 130, 'model_type': 'roberta', 'num_attention_heads': 2, 'num_hidden_layers': 1, 'pad_token_id': 0, 'tie_word_embeddings': True, 'type_vocab_size': 1, 'use_cache': True, 'vocab_size': 300},
        'pooling': 'cls',
    },
    'loss: cross_entropy': {
        'label_smoothing': 0.0,
    },
    'optimizer: adam': {
        'adam_betas': [0.9, 0.999],
        'adam_eps': 1e-06,
        'weight_decay': 0.0,
        'adam_implementation': 'fused',
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
