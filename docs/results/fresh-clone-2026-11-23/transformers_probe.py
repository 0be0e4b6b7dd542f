import sys, torch
import transformers
r = [f"torch {torch.__version__} transformers {transformers.__version__}"]
try:
    from transformers.models.bert import modeling_bert  # what the suite's requires imports
    from transformers.models.llama import modeling_llama
    from transformers.models.clip import modeling_clip
    for name, cfgcls, modelcls, kw in [
        ("bert", transformers.BertConfig, transformers.BertForSequenceClassification, dict(num_labels=6, num_hidden_layers=2)),
        ("llama", transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, vocab_size=1000)),
        ("clip", transformers.CLIPTextConfig, transformers.CLIPTextModel, dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)),
    ]:
        cfg = cfgcls(**kw)
        try:
            m = modelcls(cfg, attn_implementation="eager")
        except TypeError:
            m = modelcls(cfg)
        ids = torch.randint(0, 1000, (2, 16))
        out = m(input_ids=ids)
        if name == "llama":
            m.generate(ids, max_new_tokens=3, do_sample=False)
        r.append(f"{name}:ok")
except Exception as e:
    r.append(f"FAIL {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
print(" | ".join(r))
