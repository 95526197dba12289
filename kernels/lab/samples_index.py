"""Write sample_traces/manifest.json: the index of the bundled cases (one runner output folder per case).

    python -m kernels.lab.samples_index [sample_traces]

Each case folder holds what `python -m kernels.profile` wrote (traces, manifest.json, *.ncu.json); this index lists
them in display order, marks the one the dashboard opens on (default_case) and each case's baseline variant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CASES = [
    ("hf_geglu_bf16", "HF GEGLU MLP, 64x128 tokens, d 768, h 3072, bf16 (the HF post's case)", "eager"),
    ("gemma_layer_bf16", "Gemma-style layer (H100): hidden 2048, 8 q / 1 KV heads, seq 2048, bf16", "eager"),
    ("llama_layer_bf16", "Llama-style layer (H100): hidden 2048, 16 q / 4 KV heads, seq 2048, bf16", "eager"),
    ("swiglu_fp16", "SwiGLU MLP, 8192 tokens, d 768, h 3072, fp16", "eager"),
    ("plain_8192tok_bf16", "Plain MLP (Linear-GELU-Linear, bias), 8192 tokens, bf16", "eager"),
    ("plain_1tok_bf16", "Plain MLP, 1 token (decode), bf16", "eager"),
    ("geglu_train_bf16", "HF GEGLU MLP, one forward+backward training step, bf16", "eager"),
    # `device_job.sh record-train`: the same step with the fuselens variant's backward (listed once recorded)
    ("geglu_train_fuselens_bf16", "HF GEGLU MLP training step with the FuseLens backward, bf16", "eager"),
    # recorded by `device_job.sh ncu-warm` (flushed + in-sequence ncu DRAM bytes); h200_: the same cases on an H200
    ("plain_8192tok_h8192_bf16", "Plain MLP, 8192 tokens, h 8192 (a 134 MB intermediate, beyond L2), bf16", "eager"),
    ("h200_hf_geglu_bf16", "HF GEGLU MLP, 64x128 tokens, d 768, h 3072, bf16, on an H200", "eager"),
    ("h200_plain_8192tok_bf16", "Plain MLP, 8192 tokens, bf16, on an H200", "eager"),
    ("h200_plain_8192tok_h8192_bf16", "Plain MLP, 8192 tokens, h 8192, bf16, on an H200", "eager"),
    # whole Hugging Face models (device_job.sh record-model / record-model-big: kernels.models.whole_model)
    ("h200_llama_model_bf16", "Llama, 4 layers (whole model), forward, 4x1024 tokens, bf16, on an H200", "eager"),
    ("h200_llama_model_train_bf16", "Llama, 4 layers, training step (loss, backward, AdamW), bf16, H200", "eager"),
    ("h200_gemma_model_bf16", "Gemma, 4 layers (whole model), forward, 4x1024 tokens, bf16, on an H200", "eager"),
    ("h200_llama16_model_train_bf16", "Llama, 16 layers, training step, bf16, on an H200", "eager"),
    ("llama_model_bf16", "Llama, 4 layers (whole model), forward, 4x1024 tokens, bf16 (H100)", "eager"),
    ("llama_model_train_bf16", "Llama, 4 layers, training step (loss, backward, AdamW), bf16 (H100)", "eager"),
    ("llama32_model_train_bf16", "Llama, 32 layers, training step, bf16 (H100)", "eager"),
]


def build_index(root: Path) -> dict:
    cases = []
    for folder, title, baseline in CASES:
        mpath = root / folder / "manifest.json"
        if not mpath.exists():
            continue
        m = json.loads(mpath.read_text())
        variants = [
            {k: v[k] for k in ("name", "trace", "median_us", "ncu") if k in v}
            for v in m["variants"]
            if v.get("status") == "done"
        ]
        cases.append(
            {
                "id": folder,
                "title": title,
                "folder": folder,
                "manifest": f"{folder}/manifest.json",
                "baseline": baseline,
                "workload": m["workload"],
                "dtype": m["dtype"],
                "train": m["train"],
                "shapes": m["shapes"],
                "gpu": m["gpu"]["name"],
                "variants": variants,
            }
        )
    return {"schema": "fuselens.samples/1", "default_case": CASES[0][0], "cases": cases}


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "sample_traces")
    (root / "manifest.json").write_text(json.dumps(build_index(root), indent=1) + "\n")


if __name__ == "__main__":
    main()
