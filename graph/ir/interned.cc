//===- interned.cc - Strings stored once for the life of the process -----===//
#include "graph/ir/interned.h"

#include <deque>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace kiln {
namespace {

struct Pool {
  Pool() : empty(&texts.emplace_back()) { ids.emplace(*empty, 0); }
  std::mutex mu;
  std::deque<std::string> texts;  // by id; elements never move
  absl::flat_hash_map<absl::string_view, int64_t> ids;  // views of `texts`
  const std::string* const empty;
};

// Never destroyed: references handed out stay valid through static
// destruction.
Pool& ThePool() {
  static auto* pool = new Pool();
  return *pool;
}

}  // namespace

InternedString Intern(absl::string_view s) {
  Pool& p = ThePool();
  if (s.empty()) return {0, p.empty};
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.ids.find(s);
  if (it == p.ids.end()) {
    const std::string& text = p.texts.emplace_back(s);
    it = p.ids.emplace(text, static_cast<int64_t>(p.texts.size() - 1)).first;
  }
  return {it->second, &p.texts[it->second]};
}

const std::string& InternedText(int64_t id) {
  Pool& p = ThePool();
  if (id == 0) return *p.empty;
  std::lock_guard<std::mutex> lock(p.mu);
  return p.texts[static_cast<size_t>(id)];
}

}  // namespace kiln
