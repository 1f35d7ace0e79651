//===- cuda_copy_chains.h - Copies in a row composed into one -*- C++ -*-===//
//
// Copies in a row. A copy whose output only other copies read (directly or
// through views) need not write it: each reader's piece composes with the
// piece that wrote it (ComposePieces) and reads the writer's source
// instead, so the qkv Split of an attention and the Transposes that make
// its heads are one launch per head tensor, not two.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "graph/ir/graph.h"
#include "target/backend/copy_pieces.h"

namespace kiln::target::cuda {

class CopyChains {
 public:
  // A piece of a copy node and the value it reads.
  struct Read {
    CopyPiece piece;
    const Value* source = nullptr;
  };

  // `on_device(n)`: n is a copy op that runs as copy kernels; `on_host`:
  // nodes that run on the host whatever they are (a view among them is a
  // reader like any other).
  CopyChains(const Graph& g, const std::function<bool(const Node&)>& on_device,
             const absl::flat_hash_map<const Node*, std::string>& on_host);

  // The pieces of copy node `n` (null when it has none).
  const std::vector<Read>* ReadsOf(const Node* n) const {
    auto it = reads_.find(n);
    return it == reads_.end() ? nullptr : &it->second;
  }
  // Whether no launch writes `v` (a copy's output, or a view of one).
  bool Absorbed(const Value* v) const { return absorbed_.contains(v); }

 private:
  // Composes every read of output j of `a` into its readers when all of
  // them are copies seen already and all compose.
  void Absorb(const Node* a, int j, const absl::flat_hash_set<const Value*>& outputs);

  const absl::flat_hash_map<const Node*, std::string>& on_host_;
  absl::flat_hash_map<const Node*, std::vector<Read>> reads_;
  absl::flat_hash_set<const Value*> absorbed_;
};

}  // namespace kiln::target::cuda
