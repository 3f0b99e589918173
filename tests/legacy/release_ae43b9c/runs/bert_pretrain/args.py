# code version: xdpx ae43b9ca2ecdc91588d690b5878d6dd0ab30d584 in /work/legacy
# code version: working directory 8533cbb406428093c4d36158a4b6ca0c34642f7e (dirty) in /work/main
{
    'train': {
        'user_dir': None,
        'data_dir': 'data/daily_pretrain',  # *
        'save_dir': 'runs/bert_pretrain',  # *
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
        'major_metric': 'mlm_accuracy',  # *
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
        'model': 'bert_pretrain',  # *
        'loss': 'mlm_sop',  # *
        'optimizer': 'adam',
        'lr_scheduler': 'constant',
        'callbacks': [],
        'processor': 'bert_pretrain',  # *
        'tokenizer': 'bert',  # *
        'loader': 'corpus',  # *
        'parser': 'csv',
        'max_len': 32,  # *
        'min_len': 1,
        'pad_word': '[PAD]',  # *
        'unk_word': '[UNK]',  # *
        'lower': True,
        'target_type': 'text',
        'target_unk': None,
        'vocab_size': 171,  # *
        'pad_index': 0,  # *
        'unk_index': 1,  # *
        'cls_index': 2,  # *
        'sep_index': 3,  # *
        'mask_index': 4,  # *
        'num_classes': None,
        'special_targets': None,
        'data_size': {'dev': 128, 'train': 462},  # *
        'format_version': 1,  # *
        'fingerprint': {'options': '68fca59b9df384ed', 'dev': '5089a4cefd7c7686', 'train': 'a92e6e3c679bf4ba'},  # *
        'valid_batch_size': 16,
    },
    'model: bert_pretrain': {
        'hidden_size': 8,  # *
        'num_hidden_layers': 1,  # *
        'num_attention_heads': 2,  # *
        'intermediate_size': 16,  # *
        'max_position_embeddings': 64,  # *
        'from_tf': False,
        'gradient_checkpointing': False,
        'freeze_embeddings': False,
        'freeze_layers': 0,
        'layer_lr_decay': 1.0,
        'head_lr_multiplier': 1.0,
        'lora': None,
        'hidden_act': 'gelu',
        'type_vocab_size': 2,
        'layer_norm_eps': 1e-12,
        'hidden_dropout_prob': 0.1,
        'attention_probs_dropout_prob': 0.1,
        'initializer_range': 0.02,
        'pruned_heads': {},
    },
    'loss: mlm_sop': {
        'sop_weight': 1.0,
    },
    'optimizer: adam': {
        'adam_betas': [0.9, 0.999],
        'adam_eps': 1e-06,
        'weight_decay': 0.0,
        'adam_implementation': 'fused',
    },
    'processor: bert_pretrain': {
        'cls_word': '[CLS]',
        'sep_word': '[SEP]',
        'mask_word': '[MASK]',
        'mask_prob': 0.15,
        'random_token_prob': 0.1,
        'leave_unmasked_prob': 0.1,
        'mask_whole_words': False,
    },
    'tokenizer: bert': {
        'strip_accents': None,
        'fast_chinese': True,
    },
    'loader: corpus': {
        'break_mode': 'complete',
    },
    'parser: csv': {
        'delimiter': '\t',
        'quotechar': None,
    },
}
