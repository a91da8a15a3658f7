"""``POST /v1/run`` of `torchedge serve`: any program, arrays in and out, checked against
`Method.execute` on the same inputs."""

from __future__ import annotations

import io
import socket

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from tests.generation.serve_support import GOLDEN, LIFETIME  # noqa: E402
from torchedge.generation.serving.app import ModelServer  # noqa: E402
from torchedge.generation.serving.server import ServerThread  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402


@pytest.fixture(scope="module")
def mlp_server():
    """tests/golden/mlp.pte (one float32 input of shape [2, 8]) on 2 slots."""
    with ServerThread(ModelServer.from_path(str(GOLDEN / "mlp.pte"), max_concurrency=2), lifetime=LIFETIME) as url:
        yield url


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_run_equals_method_execute(mlp_server):
    inputs = [np.load(GOLDEN / "mlp.npz")["forward/0/in0"]]
    program = Runtime.get().load_program(str(GOLDEN / "mlp.pte"))
    want = program.load_method("forward").execute(inputs)

    as_json = httpx.post(f"{mlp_server}/v1/run", json={"inputs": [inputs[0].tolist()]}).json()
    assert as_json["method"] == "forward" and as_json["outputs"][0]["name"] == "output_0"
    got = np.asarray(as_json["outputs"][0]["data"], dtype=as_json["outputs"][0]["dtype"])
    np.testing.assert_array_equal(got, want[0])

    named = httpx.post(f"{mlp_server}/v1/run", json={"inputs": {"input_0": inputs[0].tolist()}}).json()
    assert named["outputs"] == as_json["outputs"]

    reply = httpx.post(
        f"{mlp_server}/v1/run?format=npz", content=_npy(inputs[0]), headers={"Content-Type": "application/x-npy"}
    )
    np.testing.assert_array_equal(np.load(io.BytesIO(reply.content))["output_0"], want[0])

    npz = io.BytesIO()
    np.savez(npz, input_0=inputs[0])
    reply = httpx.post(f"{mlp_server}/v1/run", content=npz.getvalue(), headers={"Accept": "application/x-npz"})
    np.testing.assert_array_equal(np.load(io.BytesIO(reply.content))["output_0"], want[0])


@pytest.mark.parametrize(
    "body, status, param, code",
    [
        ({"inputs": [[[1.0, 2.0]]]}, 400, "inputs[0]", "wrong_shape"),
        ({"inputs": [[[0.5] * 8] * 3]}, 400, "inputs[0]", "wrong_shape"),
        ({"inputs": [[0.5] * 16]}, 400, "inputs[0]", "wrong_shape"),
        ({"inputs": []}, 400, "inputs", "wrong_input_count"),
        ({"inputs": [[[1, 2], [3]]]}, 400, "inputs[0]", "invalid_array"),
        ({"inputs": {"x": [1]}}, 400, "inputs.x", "invalid_value"),
        ({"method": "backward", "inputs": []}, 404, "method", "method_not_found"),
        ({}, 400, "inputs", "missing_required_parameter"),
    ],
)
def test_bad_run_requests_name_the_field(mlp_server, body, status, param, code):
    reply = httpx.post(f"{mlp_server}/v1/run", json=body)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")


@pytest.mark.parametrize(
    "array, code", [(np.zeros((2, 7), np.float32), "wrong_shape"), (np.zeros((2, 8), np.float64), "wrong_dtype")]
)
def test_bad_npy_bodies_name_the_input(mlp_server, array, code):
    reply = httpx.post(f"{mlp_server}/v1/run", content=_npy(array), headers={"Content-Type": "application/x-npy"})
    assert reply.status_code == 400
    assert (reply.json()["error"]["param"], reply.json()["error"]["code"]) == ("inputs[0]", code)
    assert httpx.get(f"{mlp_server}/health").json()["status"] == "ok"  # and the server is still up


def test_text_endpoints_refuse_a_plain_model(mlp_server):
    client = openai.OpenAI(base_url=f"{mlp_server}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="mlp", prompt="hi")
    assert caught.value.body["code"] == "model_not_text_generation" and "/v1/run" in caught.value.body["message"]


def test_every_connection_sends_at_once():
    """TCP_NODELAY on the server's side of each connection: a keep-alive reply written in two
    parts (head, then body) is not held back until the client's delayed ACK (40 ms on Linux)."""
    thread = ServerThread(ModelServer.from_path(str(GOLDEN / "mlp.pte")), lifetime=LIFETIME)
    with thread as url, httpx.Client() as http:
        assert http.get(f"{url}/health").status_code == http.get(f"{url}/health").status_code == 200
        connections = thread._uvicorn.server_state.connections
        sockets = [c.transport.get_extra_info("socket") for c in connections]
        assert sockets and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
