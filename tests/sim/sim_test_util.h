//===- sim_test_util.h - Running .kasm text on the model in tests -*- C++ -*-===//
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"

namespace kiln::sim::testing {

inline std::string ReadSource(const std::string& rel) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A .kasm program loaded on a device with its arguments allocated and filled
// as the file says (zero or random; npy is the driver's business).
struct Loaded {
  KasmFile file;
  std::unique_ptr<Device> dev;
  KernelId kernel = -1;
  std::vector<DevAddr> addrs;

  std::vector<uint8_t> Bytes(const std::string& arg) {
    for (size_t i = 0; i < file.program.args.size(); ++i)
      if (file.program.args[i].name == arg) {
        std::vector<uint8_t> out(file.program.args[i].Bytes());
        EXPECT_TRUE(dev->Read(addrs[i], out.data(), out.size()).ok());
        return out;
      }
    ADD_FAILURE() << "no argument " << arg;
    return {};
  }
  template <typename T>
  std::vector<T> Values(const std::string& arg) {
    std::vector<uint8_t> b = Bytes(arg);
    std::vector<T> v(b.size() / sizeof(T));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
    return v;
  }
  absl::StatusOr<RunStats> Run(RunOptions opt = {}, int64_t block_dim = -1) {
    StreamId s = dev->CreateStream();
    absl::Status st = dev->Launch(s, kernel, block_dim < 0 ? file.block_dim : block_dim, addrs);
    if (!st.ok()) return st;
    return dev->Run(opt);
  }
};

inline std::unique_ptr<Loaded> Load(const std::string& text, const Machine& m = DefaultMachine()) {
  auto l = std::make_unique<Loaded>();
  auto f = Assemble(text, "test.kasm");
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return nullptr;
  l->file = *std::move(f);
  auto d = Device::Create(m);
  EXPECT_TRUE(d.ok()) << d.status();
  l->dev = *std::move(d);
  auto k = l->dev->LoadProgram(l->file.program);
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return nullptr;
  l->kernel = *k;
  for (size_t i = 0; i < l->file.program.args.size(); ++i) {
    const Arg& a = l->file.program.args[i];
    auto addr = l->dev->Malloc(a.Bytes());
    EXPECT_TRUE(addr.ok());
    l->addrs.push_back(*addr);
    if (l->file.data[i].init == InitKind::kRandom) {
      std::vector<uint8_t> bytes(a.Bytes());
      RandomFill(a.dtype, l->file.data[i].seed, bytes.data(), a.Bytes() / DTypeSize(a.dtype));
      EXPECT_TRUE(l->dev->Write(*addr, bytes.data(), bytes.size()).ok());
    }
  }
  return l;
}

}  // namespace kiln::sim::testing
