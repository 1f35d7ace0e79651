//===- conformance.cc - The ONNX backend test suite as a harness ----------===//
#include "tools/conformance/conformance.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/status.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

enum class Outcome { kPass, kFail, kSkip };

struct TestResult {
  Outcome outcome = Outcome::kFail;
  std::string reason;
};

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]");
}

// Sequence and optional values are outside kiln's numeric tensor model.
bool IsUnsupportedValueKind(const absl::Status& s) {
  absl::string_view m = s.message();
  return absl::StrContains(m, "Sequence") || absl::StrContains(m, "sequence") ||
         absl::StrContains(m, "Optional") || absl::StrContains(m, "optional value");
}

bool UsesSequenceOrOptional(const Graph& g) {
  auto bad = [](const Value* v) { return v->type().kind() == Type::Kind::kSequence ||
                                         v->type().kind() == Type::Kind::kOptional; };
  for (Value* v : g.inputs()) if (bad(v)) return true;
  for (Value* v : g.outputs()) if (bad(v)) return true;
  for (Node* n : g.nodes()) {
    for (Value* o : n->outputs()) if (bad(o)) return true;
    for (Graph* sub : n->subgraphs()) if (UsesSequenceOrOptional(*sub)) return true;
  }
  return false;
}

// The ONNX 1.12 test data stores bfloat16 tensors as uint16 (the bits are
// bfloat16): reinterpret such data where the model says bf16.
Tensor ReinterpretBits(const Tensor& t, DType to) {
  Tensor out(to, t.dims());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

// Random ops draw from kiln's own generator; the test data fixed numpy's.
bool UsesRandomOps(const Graph& g) {
  for (Node* n : g.nodes()) {
    const std::string& op = n->op();
    if (op == "Bernoulli" || op == "Multinomial" || absl::StartsWith(op, "RandomUniform") ||
        absl::StartsWith(op, "RandomNormal"))
      return true;
    for (Graph* sub : n->subgraphs())
      if (UsesRandomOps(*sub)) return true;
  }
  return false;
}

TestResult RunOne(const fs::path& dir, const ConformanceOptions& options, const ModelRunner& runner) {
  TestResult r;
  auto model = onnx_import::ImportFile((dir / "model.onnx").string());
  if (!model.ok()) {
    if (IsUnsupportedValueKind(model.status())) {
      r.outcome = Outcome::kSkip;
      r.reason = "uses sequence or optional values, which kiln's tensor executor does not model";
    } else {
      r.reason = absl::StrCat("import: ", model.status().message());
    }
    return r;
  }
  if (UsesSequenceOrOptional(*model->graph)) {
    r.outcome = Outcome::kSkip;
    r.reason = "uses sequence or optional values, which kiln's tensor executor does not model";
    return r;
  }
  if (UsesRandomOps(*model->graph)) {
    r.outcome = Outcome::kSkip;
    r.reason = "outputs are random draws; the expected values come from numpy's generator";
    return r;
  }
  if (options.transform_model) {
    absl::Status s = options.transform_model(*model);
    if (!s.ok()) {
      r.reason = std::string(s.message());
      return r;
    }
  }
  if (options.extra_model_check) {
    absl::Status s = options.extra_model_check(*model);
    if (!s.ok()) {
      r.reason = std::string(s.message());
      return r;
    }
  }
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && absl::StartsWith(e.path().filename().string(), "test_data_set_")) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.outcome = Outcome::kSkip;
    r.reason = "has no test_data_set";
    return r;
  }
  for (const fs::path& set : sets) {
    std::vector<Tensor> inputs;
    for (const std::string& f : NumberedFiles(set, "input")) {
      auto t = onnx_import::ReadTensorProtoFile(f);
      if (!t.ok()) {
        if (IsUnsupportedValueKind(t.status()) || absl::StrContains(t.status().message(), "not a serialized")) {
          r.outcome = Outcome::kSkip;
          r.reason = "test data holds sequence or optional values, which kiln's tensor executor does not model";
        } else {
          r.reason = absl::StrCat("reading ", f, ": ", t.status().message());
        }
        return r;
      }
      inputs.push_back(*std::move(t));
    }
    std::vector<std::string> expected_files = NumberedFiles(set, "output");
    // Models with fewer graph inputs than files: trailing optional inputs.
    const Graph& g = *model->graph;
    if (inputs.size() != g.inputs().size()) {
      r.reason = absl::StrCat(set.filename().string(), ": ", inputs.size(), " input files for ", g.inputs().size(),
                              " graph inputs");
      return r;
    }
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k].dtype() == DType::kU16 && g.inputs()[k]->type().dtype() == DType::kBF16)
        inputs[k] = ReinterpretBits(inputs[k], DType::kBF16);
    auto outputs = runner(*model, std::move(inputs));
    if (!outputs.ok()) {
      r.reason = absl::StrCat(set.filename().string(), ": ", outputs.status().message());
      return r;
    }
    if (outputs->size() != expected_files.size()) {
      r.reason = absl::StrCat(set.filename().string(), ": ", outputs->size(), " outputs, expected ",
                              expected_files.size());
      return r;
    }
    for (size_t i = 0; i < expected_files.size(); ++i) {
      auto expected = onnx_import::ReadTensorProtoFile(expected_files[i]);
      if (!expected.ok()) {
        r.outcome = Outcome::kSkip;
        r.reason = "expected output is not a tensor (sequence or optional), which kiln does not model";
        return r;
      }
      Tensor actual = (*outputs)[i];
      if (expected->dtype() == DType::kU16 && actual.dtype() == DType::kBF16)
        actual = ReinterpretBits(actual, DType::kU16);
      absl::Status s = CompareTensors(*expected, actual, options.rtol, options.atol);
      if (!s.ok()) {
        r.reason = absl::StrCat(set.filename().string(), ": output ", i, " ('", g.outputs()[i]->name(), "'): ",
                                s.message());
        return r;
      }
    }
  }
  r.outcome = Outcome::kPass;
  return r;
}

// Runs RunOne in a child process; a crash or timeout becomes a failure.
TestResult RunIsolated(const fs::path& dir, const ConformanceOptions& options, const ModelRunner& runner) {
  absl::StatusOr<std::string> msg = RunInChild(
      [&] {
        TestResult r = RunOne(dir, options, runner);
        return absl::StrCat(static_cast<int>(r.outcome), r.reason);
      },
      options.timeout_seconds);
  TestResult r;
  if (!msg.ok()) {
    r.reason = std::string(msg.status().message());
    return r;
  }
  r.outcome = static_cast<Outcome>((*msg)[0] - '0');
  r.reason = msg->substr(1);
  return r;
}

}  // namespace

// Files named PREFIX_<index>.pb in `dir`, ordered by index.
std::vector<std::string> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (!absl::StartsWith(name, prefix + "_") || !absl::EndsWith(name, ".pb")) continue;
    std::string idx = name.substr(prefix.size() + 1, name.size() - prefix.size() - 4);
    if (idx.empty() || !std::all_of(idx.begin(), idx.end(), ::isdigit)) continue;
    found.push_back({std::stoi(idx), e.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [i, p] : found) out.push_back(p);
  return out;
}

// Sequence and optional values are outside kiln's numeric tensor model.
bool IsUnsupportedValueKind(const absl::Status& s) {
  absl::string_view m = s.message();
  return absl::StrContains(m, "Sequence") || absl::StrContains(m, "sequence") ||
         absl::StrContains(m, "Optional") || absl::StrContains(m, "optional value");
}

absl::StatusOr<std::string> RunInChild(const std::function<std::string()>& work, int timeout_seconds) {
  int fds[2];
  if (pipe(fds) != 0) return work();
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return work();
  }
  if (pid == 0) {
    close(fds[0]);
    const std::string msg = work();
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += n;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool timed_out = false;
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      timed_out = pr == 0;
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    msg.append(buf, n);
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat("timed out after ", timeout_seconds, " s"));
  if (WIFSIGNALED(status)) {
    return absl::InternalError(
        absl::StrCat("crashed with signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")"));
  }
  if (msg.empty()) return absl::InternalError("the test process exited without a result");
  return msg;
}

absl::Status CompareTensors(const Tensor& expected, const Tensor& actual, double rtol, double atol) {
  if (expected.dtype() != actual.dtype())
    return InvalidArgument("dtype ", DTypeName(actual.dtype()), ", expected ", DTypeName(expected.dtype()));
  if (expected.dims() != actual.dims())
    return InvalidArgument("shape ", Describe(actual), ", expected ", Describe(expected));
  if (expected.dtype() == DType::kString) {
    for (int64_t i = 0; i < expected.numel(); ++i)
      if (expected.data<std::string>()[i] != actual.data<std::string>()[i])
        return InvalidArgument("element ", i, " is \"", actual.data<std::string>()[i], "\", expected \"",
                               expected.data<std::string>()[i], "\"");
    return absl::OkStatus();
  }
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.GetDouble(i), a = actual.GetDouble(i);
    bool ok;
    if (std::isnan(e)) ok = std::isnan(a);
    else if (std::isinf(e)) ok = a == e;
    else if (IsFloat(expected.dtype())) ok = std::abs(a - e) <= atol + rtol * std::abs(e);
    else ok = expected.GetInt(i) == actual.GetInt(i);
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      worst = std::max(worst, std::abs(a - e));
    }
  }
  if (bad == 0) return absl::OkStatus();
  return InvalidArgument(bad, " of ", expected.numel(), " elements differ; first at ", first, ": got ",
                         actual.GetDouble(first), ", expected ", expected.GetDouble(first),
                         "; max abs error ", worst);
}

absl::StatusOr<ConformanceSummary> RunConformance(const ConformanceOptions& options, const ModelRunner& runner,
                                                  std::ostream& out) {
  std::optional<std::regex> filter;
  if (!options.filter.empty()) {
    try {
      filter.emplace(options.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return InvalidArgument("--filter: not a valid regular expression: ", e.what());
    }
  }
  std::vector<std::pair<std::string, fs::path>> tests;
  for (const std::string& suite : options.suites) {
    fs::path root = fs::path(options.data_dir) / suite;
    std::error_code ec;
    if (!fs::is_directory(root, ec))
      return NotFound("ONNX test data not found at '", root.string(), "' (install libonnx-testdata)");
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (!e.is_directory()) continue;
      std::string id = absl::StrCat(suite, "/", e.path().filename().string());
      if (filter && !std::regex_search(id, *filter)) continue;
      tests.push_back({id, e.path()});
    }
  }
  std::sort(tests.begin(), tests.end());
  ConformanceSummary sum;
  size_t i = 0;
  for (const auto& [id, dir] : tests) {
    ++i;
    if (options.progress) std::cerr << "\r\033[K[" << i << "/" << tests.size() << "] " << id << std::flush;
    TestResult r = options.isolate ? RunIsolated(dir, options, runner) : RunOne(dir, options, runner);
    switch (r.outcome) {
      case Outcome::kPass:
        ++sum.passed;
        if (options.verbose) out << "PASS " << id << "\n";
        break;
      case Outcome::kFail:
        ++sum.failed;
        out << "FAIL " << id << ": " << r.reason << "\n";
        break;
      case Outcome::kSkip:
        ++sum.skipped;
        out << "SKIP " << id << ": " << r.reason << "\n";
        break;
    }
    out.flush();
  }
  if (options.progress) std::cerr << "\r\033[K" << std::flush;
  if (options.before_summary) out << options.before_summary();
  out << sum.passed << " passed, " << sum.failed << " failed, " << sum.skipped << " skipped\n";
  return sum;
}

}  // namespace kiln
