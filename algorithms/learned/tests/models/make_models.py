"""Writes the test models of ccp-learned (the .onnx files beside this script) and prints nothing.

    python make_models.py    # needs numpy and onnx (scripts/python-package.sh's venv has both)

Every weight comes from numpy's seeded generator, so the files are reproducible; the tests read
only the committed files. Manifests (.toml) are written by hand beside them.
"""

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).parent
OPSET = [helper.make_opsetid("", 17)]
HISTORY, FEATURES = 10, 6


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def save(name, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="ccp-learned tests")
    onnx.checker.check_model(model)
    onnx.save(model, str(HERE / f"{name}.onnx"))


def mlp(rng):
    """The MLP of the issue's cost table: 60 inputs, two hidden layers of 64 (tanh), one output."""
    sizes = [HISTORY * FEATURES, 64, 64, 1]
    nodes, inits, x = [], [], "observation"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        inits += [tensor(f"w{i}", rng.normal(0, 1 / np.sqrt(a), (a, b))), tensor(f"b{i}", rng.normal(0, 0.1, b))]
        out = "action" if i == len(sizes) - 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [out if out == "action" else f"z{i}"]))
        if out != "action":
            nodes.append(helper.make_node("Tanh", [f"z{i}"], [out]))
        x = out
    save("mlp", nodes, [helper.make_tensor_value_info("observation", TensorProto.FLOAT, [1, sizes[0]])],
         [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 1])], inits)


def gru(rng):
    """A small recurrent policy: a GRU of 32 over the 10 reports of 6 features, then a linear head."""
    hidden = 32
    inits = [
        tensor("W", rng.normal(0, 0.3, (1, 3 * hidden, FEATURES))),
        tensor("R", rng.normal(0, 0.3, (1, 3 * hidden, hidden))),
        tensor("B", rng.normal(0, 0.1, (1, 6 * hidden))),
        tensor("head", rng.normal(0, 0.3, (hidden, 1))),
        numpy_helper.from_array(np.array([1, hidden], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Transpose", ["observation"], ["seq"], perm=[1, 0, 2]),
        helper.make_node("GRU", ["seq", "W", "R", "B"], ["", "h_last"], hidden_size=hidden, linear_before_reset=1),
        helper.make_node("Reshape", ["h_last", "flat"], ["h"]),
        helper.make_node("MatMul", ["h", "head"], ["z"]),
        helper.make_node("Tanh", ["z"], ["action"]),
    ]
    save("gru", nodes, [helper.make_tensor_value_info("observation", TensorProto.FLOAT, [1, HISTORY, FEATURES])],
         [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 1])], inits)


def slow():
    """A model that is slow to run and small on disk: four 1024×1024 products of weights the
    graph makes at load time (ConstantOfShape), for the deadline tests."""
    width = 1024
    inits = [numpy_helper.from_array(np.array([HISTORY * FEATURES, width], dtype=np.int64), "in_shape"),
             numpy_helper.from_array(np.array([width, width], dtype=np.int64), "sq_shape")]
    one = helper.make_tensor("v", TensorProto.FLOAT, [1], [1e-3])
    nodes = [helper.make_node("ConstantOfShape", ["in_shape"], ["w_in"], value=one),
             helper.make_node("ConstantOfShape", ["sq_shape"], ["w_sq"], value=one),
             helper.make_node("MatMul", ["observation", "w_in"], ["x0"])]
    for i in range(4):
        nodes.append(helper.make_node("MatMul", [f"x{i}", "w_sq"], [f"y{i}"]))
        nodes.append(helper.make_node("Tanh", [f"y{i}"], [f"x{i + 1}"]))
    nodes.append(helper.make_node("ReduceMean", ["x4"], ["action"], keepdims=1))
    save("slow", nodes, [helper.make_tensor_value_info("observation", TensorProto.FLOAT, [1, HISTORY * FEATURES])],
         [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 1])], inits)


def nan():
    """sqrt(sum of the observation): 0 for the all-zero observation a model is checked with when
    it loads, NaN once the features are negative (its manifest offsets them so)."""
    nodes = [helper.make_node("ReduceSum", ["observation"], ["s"], keepdims=1),
             helper.make_node("Sqrt", ["s"], ["action"])]
    save("nan", nodes, [helper.make_tensor_value_info("observation", TensorProto.FLOAT, [1, HISTORY * FEATURES])],
         [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 1])], [])


def two_inputs():
    nodes = [helper.make_node("Add", ["a", "b"], ["action"])]
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1])
    save("two_inputs", nodes, [vi("a"), vi("b")], [vi("action")], [])


if __name__ == "__main__":
    rng = np.random.default_rng(36)
    mlp(rng)
    gru(rng)
    slow()
    nan()
    two_inputs()
