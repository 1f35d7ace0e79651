//===- cuda_copy_chains.cc - Copies in a row composed into one -------------===//
#include "target/cuda/cuda_copy_chains.h"

#include "target/cuda/cuda_copy_kernel.h"
#include "target/cuda/cuda_values.h"

namespace kiln::target::cuda {

CopyChains::CopyChains(const Graph& g, const std::function<bool(const Node&)>& on_device,
                       const absl::flat_hash_map<const Node*, std::string>& on_host)
    : on_host_(on_host) {
  for (const Node* a : g.nodes()) {
    if (!on_device(*a)) continue;
    absl::StatusOr<std::vector<CopyPiece>> pieces = DevicePiecesOf(*a);
    if (!pieces.ok()) continue;
    std::vector<Read>& reads = reads_[a];
    for (CopyPiece& p : *pieces) reads.push_back({p, a->input(p.src)});
  }
  // In graph order, so that a chain of three composes into the last.
  absl::flat_hash_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  for (const Node* a : g.nodes())
    if (reads_.contains(a))
      for (int j = 0; j < a->num_outputs(); ++j) Absorb(a, j, outputs);
}

void CopyChains::Absorb(const Node* a, int j, const absl::flat_hash_set<const Value*>& outputs) {
  const Value* r = a->output(j);
  const Read* writer = nullptr;
  for (const Read& w : reads_.at(a)) {
    if (w.piece.dst != j) continue;
    if (writer) return;  // written in parts
    writer = &w;
  }
  if (!writer || !r->has_uses() || writer->piece.elements() != r->type().shape().NumElements()) return;
  std::vector<const Value*> seen = {r};  // r and its views
  std::vector<std::pair<Read*, CopyPiece>> composed;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (outputs.contains(seen[i])) return;
    for (const Use& u : seen[i]->uses()) {
      if (!u.user) return;
      if (IsView(*u.user) && u.index == 0 && !on_host_.contains(u.user)) {
        seen.push_back(u.user->output(0));
        continue;
      }
      auto it = reads_.find(u.user);
      if (it == reads_.end()) return;
      // Indices a Gather reads at run time are an operand, not a source.
      for (const Read& x : it->second)
        if (x.piece.index_input == u.index) return;
      bool read = false;
      for (Read& x : it->second) {
        if (x.source != seen[i]) continue;
        std::optional<CopyPiece> c = ComposePieces(x.piece, writer->piece);
        if (!c) return;
        composed.push_back({&x, *c});
        read = true;
      }
      if (!read) return;  // an operand no piece moves (a shape, say): keep it written
    }
  }
  for (auto& [x, c] : composed) {
    x->piece = std::move(c);
    x->source = writer->source;
  }
  absorbed_.insert(seen.begin(), seen.end());
}

}  // namespace kiln::target::cuda
