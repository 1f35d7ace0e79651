//===- machine.cc - Loading and validating machine descriptions -----------===//
#include "sim/machine/machine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "graph/support/status.h"
#include "graph/support/read_file.h"
#include "sim/machine/default_machine_text.h"

namespace kiln::sim {

Machine DefaultMachine() {
  // Every field is set in the shipped file; a test holds it to that.
  static const Machine* m = [] {
    auto* parsed = new Machine();
    if (!google::protobuf::TextFormat::ParseFromString(std::string(kDefaultMachineText), parsed)) std::abort();
    return parsed;
  }();
  return *m;
}

namespace {

class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string first;
};

// Walks every set numeric field; `positive` fields must be > 0, the others >= 0.
absl::Status CheckFields(const google::protobuf::Message& msg, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  const auto* d = msg.GetDescriptor();
  const auto* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string name = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      KILN_RETURN_IF_ERROR(CheckFields(r->GetMessage(msg, f), name));
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) continue;
    if (!r->HasField(msg, f)) return InvalidArgument("machine field ", name, " is missing");
    double v = 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: v = r->GetInt32(msg, f); break;
      case FieldDescriptor::CPPTYPE_INT64: v = r->GetInt64(msg, f); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: v = r->GetDouble(msg, f); break;
      default: continue;
    }
    // Latencies and the burst gap may be zero; counts, sizes, clocks and rates may not.
    // Energy figures may be zero (an action taken as free).
    bool may_be_zero = name.find("latency") != std::string::npos || name == "chip_links.count" ||
                       name == "core.mte_burst_cycles" || name == "chip.l2_size_mib" ||
                       name == "core.mte2_ub_bytes_per_cycle" || name == "core.mte1_l0b_bytes_per_cycle" ||
                       name == "core.vector_exp_ln_elements_per_cycle" || name == "core.fixp_gm_write_min_cycles" ||
                       name == "core.vector_min_cycles" || name == "core.vector_fp16_min_cycles" ||
                       name == "core.vector_fp16_special_extra_cycles" || name == "core.mte2_ub_fast_bytes" ||
                       name == "core.mte2_ub_fast_bytes_per_cycle" || name == "core.mte3_fast_bytes" ||
                       name == "core.mte3_fast_bytes_per_cycle" ||
                       absl::StartsWith(name, "energy.");
    if (!(v >= 0) || (!may_be_zero && v == 0))
      return InvalidArgument("machine field ", name, " must be ", may_be_zero ? "non-negative" : "positive",
                             ", got ", v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMachine(const Machine& m) {
  KILN_RETURN_IF_ERROR(CheckFields(m, ""));
  const Core& k = m.core();
  // Buffers hold whole fractals (512 bytes) and are addressed with 32-bit offsets.
  for (auto [name, kib] : {std::pair<const char*, int64_t>{"l1_kib", k.l1_kib()}, {"l0a_kib", k.l0a_kib()},
                           {"l0b_kib", k.l0b_kib()}, {"l0c_kib", k.l0c_kib()}, {"ub_kib", k.ub_kib()}})
    if (kib > (1 << 20)) return InvalidArgument("machine field core.", name, " is too large (", kib, " KiB)");
  if (k.vector_bytes_per_cycle() % 32 != 0)
    return InvalidArgument("machine field core.vector_bytes_per_cycle must be a multiple of 32, got ",
                           k.vector_bytes_per_cycle());
  if (m.chip().ai_cores() > 4096) return InvalidArgument("machine field chip.ai_cores is too large");
  // The L2's tags are kept per line: 16 Mi lines at most (1 GiB of 64-byte lines).
  if (m.chip().l2_line_bytes() > (1 << 20)) return InvalidArgument("machine field chip.l2_line_bytes is too large");
  if (m.chip().l2_ways() > 1024) return InvalidArgument("machine field chip.l2_ways is too large");
  if (m.chip().l2_size_mib() > (int64_t{1} << 20) ||
      (m.chip().l2_size_mib() << 20) / m.chip().l2_line_bytes() > (int64_t{1} << 24))
    return InvalidArgument("machine field chip.l2_size_mib is too large for its l2_line_bytes (",
                           m.chip().l2_size_mib(), " MiB in ", m.chip().l2_line_bytes(),
                           "-byte lines; 16 Mi lines at most)");
  // HBM in bytes (hbm_size_mib << 20) must fit 64 bits with room: 1 PiB at most.
  if (m.chip().hbm_size_mib() > (int64_t{1} << 30))
    return InvalidArgument("machine field chip.hbm_size_mib is too large (", m.chip().hbm_size_mib(),
                           " MiB, 1 PiB at most)");
  return absl::OkStatus();
}

absl::StatusOr<Machine> ParseMachine(const std::string& text, const std::string& source) {
  Machine parsed;
  google::protobuf::TextFormat::Parser parser;
  Collector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &parsed))
    return InvalidArgument(source, ":", errors.first.empty() ? "malformed machine description" : errors.first);
  Machine m = DefaultMachine();
  m.MergeFrom(parsed);
  absl::Status s = ValidateMachine(m);
  if (!s.ok()) return InvalidArgument(source, ": ", s.message());
  return m;
}

absl::StatusOr<Machine> LoadMachine(const std::string& path) {
  auto text = ReadFileBytes(path);
  if (!text.ok()) return NotFound("cannot open machine file '", path, "'");
  return ParseMachine(*text, path);
}

double HbmBytesPerCycle(const Machine& m) { return m.chip().hbm_bandwidth_gbps() * 1e3 / m.chip().clock_mhz(); }
double VectorCyclesPerRepeat(const Machine& m, Op op, int element_bytes) {
  const Core& k = m.core();
  const double plain = std::ceil(256.0 / static_cast<double>(k.vector_bytes_per_cycle()));
  if ((op == Op::kVexp || op == Op::kVln) && k.vector_exp_ln_elements_per_cycle() > 0)
    return std::max(plain, 256.0 / std::max(element_bytes, 1) / k.vector_exp_ln_elements_per_cycle());
  return IsSpecialFunction(op) ? plain * static_cast<double>(k.vector_special_cycles_per_repeat()) : plain;
}

double VectorInstructionCycles(const Machine& m, Op op, int element_bytes, int64_t repeats) {
  if (repeats <= 0) return 0;
  const Core& k = m.core();
  const bool special = IsSpecialFunction(op);
  double cycles = static_cast<double>(repeats) * VectorCyclesPerRepeat(m, op, element_bytes);
  const bool exp_ln_rate = (op == Op::kVexp || op == Op::kVln) && k.vector_exp_ln_elements_per_cycle() > 0;
  if (element_bytes == 2 && special && !exp_ln_rate)
    cycles += static_cast<double>(k.vector_fp16_special_extra_cycles());
  double floor = static_cast<double>(k.vector_min_cycles());
  if (element_bytes == 2 && !special) floor = std::max(floor, static_cast<double>(k.vector_fp16_min_cycles()));
  return std::max(cycles, floor);
}

double GmUbBytesPerCycle(const Machine& m) {
  return m.core().mte2_ub_bytes_per_cycle() > 0 ? m.core().mte2_ub_bytes_per_cycle() : m.core().mte2_bytes_per_cycle();
}
namespace {
// `bytes` moved, the first `fast_bytes` at `fast_rate` and the rest at
// `rate`, as one average rate.
double TwoRatePace(double bytes, int64_t fast_bytes, double fast_rate, double rate) {
  if (bytes <= 0 || fast_bytes <= 0 || fast_rate <= 0) return rate;
  const double fast = std::min(bytes, static_cast<double>(fast_bytes));
  return bytes / (fast / fast_rate + (bytes - fast) / rate);
}
}  // namespace

double GmUbCopyBytesPerCycle(const Machine& m, double bytes) {
  const Core& k = m.core();
  return TwoRatePace(bytes, k.mte2_ub_fast_bytes(), k.mte2_ub_fast_bytes_per_cycle(), GmUbBytesPerCycle(m));
}
double UbGmCopyBytesPerCycle(const Machine& m, double bytes) {
  const Core& k = m.core();
  return TwoRatePace(bytes, k.mte3_fast_bytes(), k.mte3_fast_bytes_per_cycle(), k.mte3_bytes_per_cycle());
}
double L0bBytesPerCycle(const Machine& m) {
  return m.core().mte1_l0b_bytes_per_cycle() > 0 ? m.core().mte1_l0b_bytes_per_cycle()
                                                 : m.core().mte1_bytes_per_cycle();
}
double L2BytesPerCycle(const Machine& m) { return m.chip().l2_bandwidth_gbps() * 1e3 / m.chip().clock_mhz(); }
double HostLinkBytesPerCycle(const Machine& m) {
  return m.host_link().bandwidth_gbps() * 1e3 / m.chip().clock_mhz();
}
double ChipLinkBytesPerCycle(const Machine& m) {
  return m.chip_links().bandwidth_gbps() * 1e3 / m.chip().clock_mhz();
}
double UsToCycles(const Machine& m, double us) { return us * m.chip().clock_mhz(); }
double AicpuTaskCycles(const Machine& m, double ops) {
  const Aicpu& a = m.aicpu();
  return (static_cast<double>(a.launch_cycles()) + ops / a.ops_per_cycle()) * m.chip().clock_mhz() / a.clock_mhz();
}

absl::StatusOr<double> AllReduceCycles(const Machine& m, int64_t bytes, int chips) {
  if (chips < 1) return InvalidArgument("an AllReduce needs at least 1 chip, got ", chips);
  if (bytes < 0) return InvalidArgument("an AllReduce of a negative size (", bytes, " bytes)");
  if (chips == 1) return 0.0;
  const int64_t links = std::min<int64_t>(m.chip_links().count(), chips - 1);
  if (links <= 0)
    return InvalidArgument("the machine has no chip links (chip_links.count = 0): an AllReduce among ", chips,
                           " chips cannot run");
  const int64_t chunk = bytes / chips + (bytes % chips != 0);
  const int64_t rounds = (chips - 1 + links - 1) / links;
  const double step = UsToCycles(m, m.chip_links().latency_us()) +
                      static_cast<double>(chunk) / ChipLinkBytesPerCycle(m);
  return 2.0 * static_cast<double>(rounds) * step;
}

}  // namespace kiln::sim
