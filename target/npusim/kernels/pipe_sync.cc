//===- pipe_sync.cc - Flags derived from what instructions touch ----------===//
#include "target/npusim/kernels/pipe_sync.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::target::npusim {

int PipeSync::Resource(const std::string& name) {
  auto [it, inserted] = resources_.emplace(name, static_cast<int>(resources_.size()));
  return it->second;
}

void PipeSync::Add(sim::Pipe p, std::string text, const std::vector<std::string>& reads,
                   const std::vector<std::string>& writes) {
  Inst in{p, std::move(text), {}, {}};
  for (const std::string& r : reads) in.reads.push_back(Resource(r));
  for (const std::string& w : writes) in.writes.push_back(Resource(w));
  insts_.push_back(std::move(in));
}

void PipeSync::AddLines(sim::Pipe p, absl::string_view text, const std::vector<std::string>& reads,
                        const std::vector<std::string>& writes) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty()))
    if (line = absl::StripAsciiWhitespace(line); !line.empty()) Add(p, std::string(line), reads, writes);
}

namespace {

constexpr int kPipes = sim::kNumPipes;
using Clock = std::array<int, kPipes>;  // per pipe: the last of its instructions known to be done

struct Plan {
  std::vector<std::vector<int>> waits;  // per instruction: the pipes it waits for first
  std::vector<std::vector<int>> sets;   // per instruction: the pipes it signals after
};

}  // namespace

std::string PipeSync::Emit(int id) const {
  const int n = static_cast<int>(insts_.size());
  Plan plan{std::vector<std::vector<int>>(n), std::vector<std::vector<int>>(n)};
  // Per resource: its last writer, and its readers since.
  std::vector<int> last_writer(resources_.size(), -1);
  std::vector<std::vector<int>> readers(resources_.size());
  std::vector<Clock> known(kPipes);  // what each pipe is known to follow
  for (Clock& c : known) c.fill(-1);
  std::vector<Clock> snapshot(n);  // what instruction i is known to follow, itself included
  for (int i = 0; i < n; ++i) {
    const Inst& in = insts_[i];
    const int p = static_cast<int>(in.pipe);
    Clock need;
    need.fill(-1);
    auto depend = [&](int j) {
      const int q = static_cast<int>(insts_[j].pipe);
      if (q != p) need[q] = std::max(need[q], j);
    };
    for (int r : in.reads)
      if (last_writer[r] >= 0) depend(last_writer[r]);
    for (int w : in.writes) {
      if (last_writer[w] >= 0) depend(last_writer[w]);
      for (int j : readers[w]) depend(j);
    }
    // Waits, latest producer first, so that one may imply another.
    std::vector<int> order;
    for (int q = 0; q < kPipes; ++q)
      if (need[q] >= 0) order.push_back(q);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return need[a] > need[b]; });
    for (int q : order) {
      if (known[p][q] >= need[q]) continue;
      const int j = need[q];
      plan.sets[j].push_back(p);
      plan.waits[i].push_back(q);
      for (int k = 0; k < kPipes; ++k) known[p][k] = std::max(known[p][k], snapshot[j][k]);
    }
    known[p][p] = i;
    snapshot[i] = known[p];
    for (int r : in.reads) readers[r].push_back(i);
    for (int w : in.writes) {
      last_writer[w] = i;
      readers[w].clear();
    }
  }
  std::string out;
  for (int i = 0; i < n; ++i) {
    const char* dst = sim::PipeName(insts_[i].pipe);
    for (int q : plan.waits[i])
      absl::StrAppend(&out, "  wait_flag ", sim::PipeName(static_cast<sim::Pipe>(q)), ", ", dst, ", ", id, "\n");
    absl::StrAppend(&out, "  ", insts_[i].text, "\n");
    for (int q : plan.sets[i])
      absl::StrAppend(&out, "  set_flag ", dst, ", ", sim::PipeName(static_cast<sim::Pipe>(q)), ", ", id, "\n");
  }
  return out;
}

}  // namespace kiln::target::npusim
