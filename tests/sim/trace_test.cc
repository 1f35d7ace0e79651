//===- trace_test.cc - Structure of the Chrome trace of the example GEMM --===//
//
// The trace must be valid JSON in the trace-event format, with every pipe
// track of each core that ran, slices inside the run's time span, no two
// slices overlapping on one track, and each flag-wait flow leaving a
// set_flag slice and arriving in the wait_flag slice it released.
//
//===----------------------------------------------------------------------===//
#include <map>
#include <memory>
#include <set>
#include <variant>

#include "gtest/gtest.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

// A small JSON reader: enough to check the trace's structure.
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>, std::map<std::string, Json>> v;
  const Json& operator[](const std::string& k) const {
    static const Json kNull;
    auto* m = std::get_if<std::map<std::string, Json>>(&v);
    if (!m) return kNull;
    auto it = m->find(k);
    return it == m->end() ? kNull : it->second;
  }
  bool Has(const std::string& k) const {
    auto* m = std::get_if<std::map<std::string, Json>>(&v);
    return m && m->count(k);
  }
  double num() const { return std::get<double>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  const std::vector<Json>& arr() const { return std::get<std::vector<Json>>(v); }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool Parse(Json* out) {
    if (!Value(out)) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Lit(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool Str(std::string* out) {
    if (s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        char c = s_[i_];
        if (c == 'u') {
          if (i_ + 4 >= s_.size()) return false;
          out->push_back(static_cast<char>(std::stoi(s_.substr(i_ + 1, 4), nullptr, 16)));
          i_ += 4;
        } else if (c == 'n') out->push_back('\n');
        else if (c == '"' || c == '\\' || c == '/') out->push_back(c);
        else return false;
        ++i_;
        continue;
      }
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      out->push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool Value(Json* out) {
    Ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      std::map<std::string, Json> m;
      Ws();
      if (s_[i_] == '}') {
        ++i_;
        out->v = std::move(m);
        return true;
      }
      while (true) {
        Ws();
        std::string k;
        if (!Str(&k)) return false;
        Ws();
        if (s_[i_++] != ':') return false;
        Json v;
        if (!Value(&v)) return false;
        m[k] = std::move(v);
        Ws();
        if (s_[i_] == ',') { ++i_; continue; }
        if (s_[i_] == '}') { ++i_; break; }
        return false;
      }
      out->v = std::move(m);
      return true;
    }
    if (c == '[') {
      ++i_;
      std::vector<Json> a;
      Ws();
      if (s_[i_] == ']') {
        ++i_;
        out->v = std::move(a);
        return true;
      }
      while (true) {
        Json v;
        if (!Value(&v)) return false;
        a.push_back(std::move(v));
        Ws();
        if (s_[i_] == ',') { ++i_; continue; }
        if (s_[i_] == ']') { ++i_; break; }
        return false;
      }
      out->v = std::move(a);
      return true;
    }
    if (c == '"') {
      std::string str;
      if (!Str(&str)) return false;
      out->v = std::move(str);
      return true;
    }
    if (Lit("true")) { out->v = true; return true; }
    if (Lit("false")) { out->v = false; return true; }
    if (Lit("null")) { out->v = nullptr; return true; }
    size_t end = i_;
    while (end < s_.size() && std::strchr("+-0123456789.eE", s_[end])) ++end;
    if (end == i_) return false;
    out->v = std::stod(s_.substr(i_, end - i_));
    i_ = end;
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

TEST(TraceTest, GemmTraceIsWellFormed) {
  auto l = testing::Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"));
  ASSERT_TRUE(l);
  RunOptions o;
  o.trace = true;
  auto r = l->Run(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const double clock = l->dev->machine().chip().clock_mhz();
  std::string text = l->dev->trace().ToJson(clock);
  Json root;
  ASSERT_TRUE(Parser(text).Parse(&root)) << "not valid JSON";
  ASSERT_TRUE(root.Has("traceEvents"));
  const double span_us = r->total_cycles / clock;

  std::map<std::pair<int, int>, std::string> threads;
  std::map<int, std::string> processes;
  struct S { double ts, end; std::string name; };
  std::map<std::pair<int, int>, std::vector<S>> slices;
  std::map<int64_t, std::pair<std::pair<int, int>, double>> flow_s, flow_f;
  for (const Json& e : root["traceEvents"].arr()) {
    const std::string& ph = e["ph"].str();
    ASSERT_TRUE(e.Has("pid") && e.Has("tid")) << ph;
    std::pair<int, int> track(static_cast<int>(e["pid"].num()), static_cast<int>(e["tid"].num()));
    if (ph == "M") {
      if (e["name"].str() == "thread_name") threads[track] = e["args"]["name"].str();
      if (e["name"].str() == "process_name") processes[track.first] = e["args"]["name"].str();
    } else if (ph == "X") {
      double ts = e["ts"].num(), dur = e["dur"].num();
      EXPECT_GE(dur, 0);
      EXPECT_GE(ts, 0);
      EXPECT_LE(ts + dur, span_us + 1e-3);
      slices[track].push_back(S{ts, ts + dur, e["name"].str()});
    } else if (ph == "s" || ph == "f") {
      int64_t id = static_cast<int64_t>(e["id"].num());
      (ph == "s" ? flow_s : flow_f)[id] = {track, e["ts"].num()};
      if (ph == "f") {
        EXPECT_EQ(e["bp"].str(), "e");
      }
    } else {
      EXPECT_EQ(ph, "C");
      EXPECT_TRUE(e["args"].Has("value"));
    }
  }
  // Every pipe track of each of the four cores, named as Ascend's tools name them.
  for (int core = 0; core < 4; ++core) {
    EXPECT_EQ(processes[core], absl::StrCat("AI core ", core));
    const char* names[] = {"SCALAR", "MTE1", "MTE2", "MTE3", "Cube", "VECTOR", "FIXP"};
    for (int p = 0; p < kNumPipes; ++p) EXPECT_EQ(threads[std::make_pair(core, p)], names[p]);
    EXPECT_FALSE(slices[std::make_pair(core, static_cast<int>(Pipe::kCube))].empty());
    EXPECT_FALSE(slices[std::make_pair(core, static_cast<int>(Pipe::kMte2))].empty());
  }
  // No overlap on a track.
  for (auto& [track, v] : slices) {
    std::sort(v.begin(), v.end(), [](const S& a, const S& b) { return a.ts < b.ts || (a.ts == b.ts && a.end < b.end); });
    for (size_t i = 1; i < v.size(); ++i)
      EXPECT_LE(v[i - 1].end, v[i].ts + 1e-9) << "overlap on " << track.first << "/" << track.second << ": "
                                               << v[i - 1].name << " and " << v[i].name;
  }
  // Flows: each start in a set_flag slice, its end in a wait_flag slice of the same core.
  // The innermost slice at ts: the latest to start, the shortest on a tie (a
  // zero-length wait_flag sits at the start of the slice after it).
  auto enclosing = [&](std::pair<int, int> track, double ts) -> std::string {
    const S* best = nullptr;
    for (const S& s : slices[track])
      if (s.ts <= ts + 1e-9 && ts <= s.end + 1e-9 &&
          (!best || s.ts > best->ts || (s.ts == best->ts && s.end < best->end)))
        best = &s;
    return best ? best->name : "";
  };
  ASSERT_FALSE(flow_s.empty());
  int connected = 0;
  for (auto& [id, f] : flow_f) {
    ASSERT_TRUE(flow_s.count(id)) << "flow " << id << " has no start";
    auto [strack, sts] = flow_s[id];
    EXPECT_EQ(enclosing(strack, sts), "set_flag");
    EXPECT_EQ(enclosing(f.first, f.second), "wait_flag");
    EXPECT_EQ(strack.first, f.first.first);
    EXPECT_LE(sts, f.second + 1e-9);
    ++connected;
  }
  // Every wait_flag of the program was released by a set_flag: on each of 4 cores,
  // 4 per half iteration x 2 halves x 4 iterations, then 5 after the loop.
  EXPECT_EQ(connected, 4 * (4 * 2 * 4 + 5));
  EXPECT_TRUE(root["metadata"].Has("truncated"));
}

}  // namespace
}  // namespace kiln::sim
