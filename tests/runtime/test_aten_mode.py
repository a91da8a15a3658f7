"""ATen mode runs programs with torch's own kernels: the differential reference for the portable ones."""

import subprocess
import sys

import pytest

from tests.conftest import assert_matches, torch_outputs, torchedge_compile
from torchedge.runtime import Runtime


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_aten_and_portable_agree_with_eager(name):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    pte = torchedge_compile(model, inputs).buffer
    expected = torch_outputs(model, inputs)
    np_inputs = [t.numpy() for t in inputs]
    aten = Runtime.get(kernels="aten").load_program(pte).load_method().execute(np_inputs)
    portable = Runtime.get().load_program(pte).load_method().execute(np_inputs)
    assert_matches(aten, expected)
    assert_matches(portable, aten)


def test_unknown_kernel_set():
    with pytest.raises(ValueError, match="unknown kernel set"):
        Runtime.get(kernels="cuda")


def test_portable_mode_stays_torch_free(add_relu):
    _, _, pte = add_relu
    code = (
        "import sys, numpy as np\n"
        "from torchedge.runtime import Runtime\n"
        f"m = Runtime.get().load_program({pte!r}).load_method()\n"
        "m.execute([np.zeros((2, 3), np.float32)])\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
