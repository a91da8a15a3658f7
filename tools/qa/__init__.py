"""torchedge's QA machinery: checks of the portable kernels against PyTorch eager, not shipped.

Imported as ``tools.qa.<module>`` with the repository root on ``sys.path`` (pytest's rootdir,
``python -m`` from the root, or the ``tools/`` scripts, which add it).

* `aten_calls`: record the ATen calls a function makes, its tensors copied at each call.
* `kernel_check`: replay a recorded call on the kernel the runtime would run and compare
  with eager (`support_tolerance`: the looser judgement of a support check).
* `opinfo_sampling`: the Edge-operator calls PyTorch's OpInfo samples make, per dtype (the
  kernel tests, and ``torchedge kernels --coverage --dtypes`` in a checkout).
* `kernel_probe`, `probe_templates`: the dtype combinations each core operator's kernel
  supports, from which ``tools/generate_edge_spec.py`` writes the Edge dialect's ``edge.yaml``.
* `op_db_sweep`, `op_db_pool`, `op_db_worker`, `op_db_report`: every OpInfo of PyTorch's
  ``op_db`` exported, lowered and run by the runtime (``tools/op_db_report.py``,
  ``tests/e2e/test_op_db.py``).
"""
