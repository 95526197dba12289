"""Op semantics, in one home: what a kernel is (`classify`: name → category, library, ops), what it computes and
moves (`cost_rules`: op → bytes, FLOPs), and which tensors flow between ops (`dataflow`)."""
