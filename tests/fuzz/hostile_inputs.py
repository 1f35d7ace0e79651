#!/usr/bin/python3
"""Hostile sizes in every file kiln reads, through the kiln driver.

Each case is a file crafted to hit one class of hostile size, or a
neighbour of it (another instruction, another field, another reader):

  1. an address or span that wraps past the bounds check (.kasm, and the
     same inside a .kiln artifact's programs);
  2. declared sizes that would make the loader allocate without limit (a
     .kiln's constants and device memory, an ONNX initializer, a machine's
     HBM);
  3. element counts that overflow before a zero dimension is reached (.npy,
     .kir, an ONNX graph whose ConstantOfShape or Expand makes such a shape,
     compiled for each target);
  4. byte sizes that overflow (a program argument's shape, an attribute
     wider than its field).

Every case must end with exit status 1 and exactly one line on stderr,
"kiln: error: ..." holding the expected words (a case expecting no words
must succeed: it makes the file the next case reads): no signal, no abort, no
sanitizer report, no hang. With --limit-gb N (the release build's run) each
command runs under an address-space limit of N GiB, as on a small machine:
a size that got past its check would then fail to allocate and abort.
.kiln files are framed as kiln writes them ("KILNART\\n", the Artifact
message, its CRC-32), so each mutation reaches the loader, not the checksum.

Usage: hostile_inputs.py KILN SOURCE_DIR [--limit-gb N]
"""
import argparse
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile
import zlib

INT64_MAX = (1 << 63) - 1


def run(kiln, args, cwd, limit_gb, timeout=120):
    def limit():
        if limit_gb:
            size = limit_gb << 30
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    try:
        p = subprocess.run([kiln] + args, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                           preexec_fn=limit, errors="replace")
    except subprocess.TimeoutExpired:
        return None, "", "timed out"
    return p.returncode, p.stdout, p.stderr


def npy(shape, payload=b""):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


class Artifacts:
    """A compiled artifact's message, mutated and framed again."""

    def __init__(self, kiln, source, scratch):
        subprocess.run(["protoc", f"--python_out={scratch}", "-I", source,
                        os.path.join(source, "target/artifact/artifact.proto"),
                        os.path.join(source, "sim/isa/isa.proto")], check=True)
        sys.path.insert(0, scratch)
        from target.artifact import artifact_pb2

        self.pb = artifact_pb2
        self.path = os.path.join(scratch, "mlp.kiln")
        model = os.path.join(source, "examples/models/tiny_cnn/model.onnx")
        subprocess.run([kiln, "compile", model, "--target=npusim", "-o", self.path], check=True,
                       capture_output=True)
        with open(self.path, "rb") as f:
            data = f.read()
        assert data[:8] == b"KILNART\n"
        # The message, and the constants' section after it where the file
        # has one (target/artifact/artifact.proto): written back as the
        # message's own constants, with the message and its checksum alone.
        n, c = struct.unpack("<QQ", data[-20:-4])
        start = (8 + n + 63) // 64 * 64
        if c and start + c + 20 == len(data):
            self.message, self.constants = data[8:8 + n], data[start:start + c]
        else:
            self.message, self.constants = data[8:-4], b""

    def write(self, path, mutate):
        a = self.pb.Artifact()
        a.ParseFromString(self.message)
        if self.constants:
            a.constants = self.constants
        mutate(a)
        body = a.SerializeToString()
        with open(path, "wb") as f:
            f.write(b"KILNART\n" + body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))


# Opcodes and operand kinds of the packed program code (sim/isa/isa.proto,
# Program.code).
OP_MOV, OP_COPY_GM_UB = 0, 20
REG, IMM, ADDR = 1, 2, 4
GM, UB = 1, 6


def inst(op, operands, attrs=()):
    """One instruction's words: its head, its operands (kind, fields...), its attributes."""
    words = [op + 1024 * 16 * 16 * len(operands)]
    for kind, *fields in operands:
        words += [kind, *fields]
    return words + list(attrs)


def set_code(a, words):
    """The first program's code replaced by `words`."""
    p = a.npusim.programs[0]
    del p.code[:]
    p.code.extend(words)


def copy_in(offset=0, nburst=1):
    """copy_gm_ub UB[0], ARG0[offset], nburst=.., len=32: the first program's first argument into UB."""
    return inst(OP_COPY_GM_UB, [(ADDR, UB, -1, -1, 0), (ADDR, GM, -1, 0, offset)], [nburst, 32, 0, 0])


def set_addr_offset(a, offset):
    set_code(a, copy_in(offset=offset))


def set_buffer_offset(a, offset):
    for b in a.npusim.buffers:
        if b.kind == 0 and not b.HasField("alias_of"):
            b.offset = offset
            return


def set_arg_shape(a, shape):
    arg = a.npusim.programs[0].args[0]
    del arg.shape[:]
    arg.shape.extend(shape)


def set_first_attr(a, value):
    set_code(a, copy_in(nburst=value))


def set_reg(a, value):
    set_code(a, inst(OP_MOV, [(REG, value), (IMM, 0)]))


def onnx_shape_model(op, shape):
    """An ONNX model whose one node (ConstantOfShape or Expand) makes a tensor of `shape`."""
    import onnx
    from onnx import TensorProto, helper

    s = helper.make_tensor("s", TensorProto.INT64, [len(shape)], shape)
    inputs = []
    if op == "Expand":
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])]
        node = helper.make_node("Expand", ["x", "s"], ["y"])
    else:
        node = helper.make_node(op, ["s"], ["y"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[s])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()


KASM_HEAD = ".program p\n.regs 4\n.block_dim 1\n.arg a f32[1024] init=random(1)\n"


def cases(kiln, source, scratch):
    """(name, kiln arguments, files to write {name: bytes}, expected words)."""
    art = Artifacts(kiln, source, scratch)
    x = os.path.join(source, "examples/models/tiny_cnn/input_0.npy")
    run_art = lambda name: ["run", name, f"--input=input_0={x}"]
    artifact_cases = [
        ("kiln constants beyond what it holds", lambda a: setattr(a.npusim, "constant_bytes", 31 << 30),
         "constants hold"),
        ("kiln device memory beyond the machine", lambda a: setattr(a.npusim, "device_bytes", INT64_MAX - 1000),
         "device memory"),
        ("kiln device memory negative", lambda a: setattr(a.npusim, "device_bytes", -(1 << 40)), ""),
        ("kiln buffer end wraps", lambda a: set_buffer_offset(a, INT64_MAX - 16), "outside its region"),
        ("kiln buffer offset negative", lambda a: set_buffer_offset(a, -4096), ""),
        ("kiln address near 2^63", lambda a: set_addr_offset(a, INT64_MAX - 31), "outside"),
        ("kiln address negative", lambda a: set_addr_offset(a, -(1 << 62)), ""),
        ("kiln argument bytes overflow", lambda a: set_arg_shape(a, [1 << 40, 1 << 40, 1 << 40, 16]), "bytes"),
        ("kiln argument dims overflow with a zero", lambda a: set_arg_shape(a, [1 << 40, 1 << 40, 1 << 40, 0]), ""),
        ("kiln attribute wider than its field", lambda a: set_first_attr(a, 1 << 40), "32-bit field"),
        ("kiln register beyond the program's", lambda a: set_reg(a, (1 << 31) - 1), ""),
        ("kiln registers without limit", lambda a: setattr(a.npusim.programs[0], "num_regs", (1 << 31) - 1), ""),
    ]
    out = []
    for i, (name, mutate, words) in enumerate(artifact_cases):
        path = os.path.join(scratch, f"hostile_{i}.kiln")
        art.write(path, mutate)
        out.append((name, run_art(path), {}, words))

    big = 1 << 32
    out += [
        ("npy dims overflow before a zero", ["run", art.path, "--input=input_0=bad.npy"],
         {"bad.npy": npy([big, big, 0])}, "too large"),
        ("npy dims overflow", ["run", art.path, "--input=input_0=bad2.npy"], {"bad2.npy": npy([big, big, 16])},
         "too large"),
        ("npy declares more than it holds", ["run", art.path, "--input=input_0=bad3.npy"],
         {"bad3.npy": npy([1 << 40])}, "needs 4398046511104"),
        ("kir input dims overflow before a zero", ["opt", "bad.kir"],
         {"bad.kir": b"graph @main(%x: f32[4294967296,4294967296,0]) {\n  %y = Relu(%x)\n  return %y\n}\n"},
         "does not fit 64 bits"),
        ("kir input bytes overflow, compiled for each target", ["compile", "bad4.kir", "--target=npusim", "-o", "o.kiln"],
         {"bad4.kir": b"graph @main(%x: f32[4294967296,4294967296,16]) {\n  %y = Relu(%x)\n  return %y\n}\n"},
         "does not fit 64 bits"),
        ("kir input bytes overflow, for cuda", ["compile", "bad4.kir", "--target=cuda", "-o", "o.cuda"], {},
         "does not fit 64 bits"),
        ("kir constant dims overflow", ["opt", "bad2.kir"],
         {"bad2.kir": b"graph @main(%x: f32[4]) {\n  %c = const f32[4294967296,4294967296,4294967296] dense [1.0]\n"
                      b"  %y = Add(%x, %c)\n  return %y\n}\n"}, "more elements than fit 64 bits"),
        ("kir constant dims overflow before a zero", ["opt", "bad3.kir"],
         {"bad3.kir": b"graph @main(%x: f32[4]) {\n  %c = const f32[4294967296,4294967296,0] dense []\n"
                      b"  %y = Add(%x, %c)\n  return %y\n}\n"}, "more elements than fit 64 bits"),
        ("kasm UB address near 2^63", ["sim", "w.kasm"],
         {"w.kasm": (KASM_HEAD + "  mov r1, 9223372036854775776\n  vadd.f32 UB[r1], UB[0], UB[0], repeat=255, "
                                 "dst_rep_stride=255\n").encode()}, "outside UB"),
        ("kasm GM copy length near 2^63", ["sim", "g.kasm"],
         {"g.kasm": (KASM_HEAD + "  copy_gm_ub UB[0], a[0], len=9223372036854775800\n").encode()}, ""),
        ("kasm GM offset near 2^63 through a register", ["sim", "r.kasm"],
         {"r.kasm": (KASM_HEAD + "  mov r1, 9223372036854775000\n  copy_gm_ub UB[0], a[r1], len=64\n").encode()},
         ""),
        ("kasm stride at its field's limit", ["sim", "s.kasm"],
         {"s.kasm": (KASM_HEAD + "  vadd.f32 UB[0], UB[0], UB[0], repeat=255, dst_rep_stride=4294967295\n").encode()},
         "outside UB"),
        ("kasm attribute wider than its field", ["sim", "a.kasm"],
         {"a.kasm": (KASM_HEAD + "  vadd.f32 UB[0], UB[0], UB[0], repeat=4294967296000\n").encode()}, "32-bit"),
        ("kasm argument bytes overflow", ["sim", "b.kasm"],
         {"b.kasm": (".program p\n.regs 4\n.block_dim 1\n.arg a f32[1099511627776,1099511627776,1099511627776,16]\n"
                     "  mov r1, 0\n").encode()}, "too large"),
        ("kasm block_dim without limit", ["sim", "d.kasm"],
         {"d.kasm": (".program p\n.regs 4\n.block_dim 4294967296\n  mov r1, 0\n").encode()}, ""),
        ("machine HBM beyond 1 PiB", ["sim", os.path.join(source, "examples/npu/vector_sigmoid.kasm"),
                                      "--machine=m.textproto"],
         {"m.textproto": re.sub(rb"hbm_size_mib: *\d+", b"hbm_size_mib: 9223372036854775807",
                                open(os.path.join(source, "sim/machines/ascend910-like.textproto"), "rb").read())},
         "hbm_size_mib"),
        ("machine L2 of more lines than its tags may hold", ["sim", os.path.join(source, "examples/npu/vector_sigmoid.kasm"),
                                                            "--machine=m.textproto"],
         {"m.textproto": b"chip { l2_size_mib: 1048576 l2_line_bytes: 1 }\n"}, "l2_size_mib is too large"),
        ("machine L2 line of 0 bytes", ["sim", os.path.join(source, "examples/npu/vector_sigmoid.kasm"),
                                        "--machine=m.textproto"],
         {"m.textproto": b"chip { l2_line_bytes: 0 }\n"}, "l2_line_bytes must be positive"),
        ("onnx ConstantOfShape whose count overflows", ["compile", "c.onnx", "--target=npusim", "-o", "c.kiln"],
         {"c.onnx": onnx_shape_model("ConstantOfShape", [big, big, 16])}, "too large"),
        ("onnx Expand whose count overflows before a zero", ["compile", "e.onnx", "--target=cuda", "-o", "e.cuda"],
         {"e.onnx": onnx_shape_model("Expand", [big, big, 0])}, "does not fit 64 bits"),
        ("onnx Expand to 4 TiB, compiled", ["compile", "h.onnx", "--target=npusim", "-o", "h.kiln"],
         {"h.onnx": onnx_shape_model("Expand", [1 << 40])}, None),
        ("onnx Expand to 4 TiB, run on the model", ["run", "h.kiln", "--input=x=one.npy"],
         {"one.npy": npy([1], b"\0\0\x80\x3f")}, "device memory"),
        ("onnx Expand to 4 TiB, run on the host", ["run", "h.onnx", "--input=x=one.npy"], {}, "too large"),
        ("onnx initializer larger than its data", ["opt", os.path.join(source, "tests/fuzz/regressions/onnx_declared_size.onnx")],
         {}, "bytes of data"),
    ]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kiln")
    parser.add_argument("source")
    parser.add_argument("--limit-gb", type=int, default=0)
    args = parser.parse_args()
    kiln = os.path.abspath(args.kiln)
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        all_cases = cases(kiln, os.path.abspath(args.source), scratch)
        for name, argv, files, words in all_cases:
            for f, data in files.items():
                with open(os.path.join(scratch, f), "wb") as out:
                    out.write(data)
            rc, _, err = run(kiln, argv, scratch, args.limit_gb)
            lines = err.splitlines()
            if words is None:  # a step that must succeed (it makes the next case's file)
                ok = rc == 0
            else:
                ok = (rc == 1 and len(lines) == 1 and lines[0].startswith("kiln: error: ") and words in lines[0])
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}: {err.strip()[:300]}")
            failures += not ok
    print(f"{len(all_cases) - failures} of {len(all_cases)} cases as they should be: hostile inputs refused with one line"
          + (f" (address space {args.limit_gb} GiB)" if args.limit_gb else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
