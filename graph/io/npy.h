//===- npy.h - NumPy .npy files to and from tensors -------------*- C++ -*-===//
//
// Reads and writes the NumPy array file format (.npy, format versions 1.0,
// 2.0 and 3.0; C order).
//
// Element types: f32 '<f4', f64 '<f8', f16 '<f2', i8 '|i1', i16 '<i2',
// i32 '<i4', i64 '<i8', u8 '|u1', u16 '<u2', u32 '<u4', u64 '<u8',
// bool '|b1', c64 '<c8', c128 '<c16'. Big-endian files ('>f4', ...) are read
// and byte-swapped; files are always written little-endian.
//
// bfloat16 has no NumPy dtype. kiln writes a bf16 tensor as a structured
// array with one uint16 field named "bf16" (descr [('bf16', '<u2')]), which
// NumPy loads as is (`a['bf16']` gives the raw bits; with ml_dtypes,
// `a['bf16'].view(ml_dtypes.bfloat16)` the values), and reads that descr
// back as bf16. Files written by ml_dtypes (descr '<V2' / '|V2') are read as
// bf16 too. A plain '<u2' file is always u16.
//
// Fortran-order arrays, object and string arrays are rejected with an
// error; so is every malformed file (the reader never trusts a size it has
// not checked against the bytes it was given).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/tensor.h"

namespace kiln {

absl::StatusOr<Tensor> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

// The same, in memory: `bytes` is a whole .npy file. With an `owner` that
// holds `bytes` (writable: a copy-on-write mapping), a little-endian
// numeric array whose data lies 64-byte aligned (as numpy writes it) is
// borrowed where it lies (Tensor::Borrowed) instead of copied.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, std::shared_ptr<const void> owner = nullptr);
absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor);

}  // namespace kiln
