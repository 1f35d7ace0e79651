//===- donation.cc - Step outputs computed in their inputs' place ---------===//
#include "target/backend/donation.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace kiln::target {
namespace {

// The last top-level node (in `order`) that reads `v`'s bytes other than
// `writer`'s one direct read, through views; -2 when some reader is not a
// top-level node, a view of `v` is a graph output (the bytes are read
// outside the order), or the writer reads them through a view as well.
int LastOtherReader(const Value* v, const Node* writer, const absl::flat_hash_map<const Node*, int>& order,
                    const std::function<bool(const Node&)>& is_view, bool direct = true) {
  int last = -1;
  for (const Use& u : v->uses()) {
    if (!u.user) return -2;  // a graph output
    auto it = order.find(u.user);
    if (it == order.end()) return -2;  // a nested graph's node
    if (u.user == writer) {
      if (!direct) return -2;
      continue;  // the writer's one read (FindDonations counts them)
    }
    last = std::max(last, it->second);
    if (is_view(*u.user) && u.user->num_outputs() == 1) {
      int through = LastOtherReader(u.user->output(0), writer, order, is_view, /*direct=*/false);
      if (through == -2) return -2;
      last = std::max(last, through);
    }
  }
  return last;
}

}  // namespace

std::vector<Donation> FindDonations(const Graph& g, const std::vector<std::pair<const Value*, const Value*>>& feeds,
                                    const std::function<bool(const Node&)>& is_view,
                                    const std::function<bool(const Node&, int input)>& writes_in_place) {
  std::vector<Donation> out;
  if (feeds.empty()) return out;
  absl::flat_hash_map<const Node*, int> order;
  int i = 0;
  for (const Node* n : g.nodes()) order[n] = i++;
  for (const auto& [input, output] : feeds) {
    const Node* w = output->producer();
    if (!w || !input->is_input()) continue;
    int index = -1, reads = 0;
    for (int k = 0; k < w->num_inputs(); ++k)
      if (w->input(k) == input) index = k, ++reads;
    if (reads != 1) continue;  // the writer reads it twice, or not itself
    if (!(input->type() == output->type()) || !input->type().is_tensor() || !input->type().shape().is_static())
      continue;
    if (!writes_in_place(*w, index)) continue;
    auto it = order.find(w);
    if (it == order.end()) continue;
    const int last = LastOtherReader(input, w, order, is_view);
    if (last == -2 || last > it->second) continue;
    // One output per donated input.
    if (std::any_of(out.begin(), out.end(), [&](const Donation& d) { return d.input == input; })) continue;
    out.push_back({input, output, w, index});
  }
  return out;
}

}  // namespace kiln::target
