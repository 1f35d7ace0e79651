//===- machine.cc - Loading and validating machine descriptions -----------===//
#include "sim/machine/machine.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "graph/support/status.h"

namespace kiln::sim {

Machine DefaultMachine() {
  Machine m;
  m.set_name("ascend910-like");
  Chip* c = m.mutable_chip();
  c->set_ai_cores(32);
  c->set_clock_mhz(1000);
  c->set_hbm_bandwidth_gbps(1200);
  c->set_hbm_latency_cycles(500);
  c->set_hbm_size_mib(32768);
  c->set_l2_size_mib(32);
  Core* k = m.mutable_core();
  k->set_cube_fp16_macs_per_cycle(4096);
  k->set_cube_int8_macs_per_cycle(8192);
  k->set_cube_fp32_macs_per_cycle(1024);
  k->set_vector_bytes_per_cycle(256);
  k->set_vector_special_cycles_per_repeat(2);
  k->set_l1_kib(1024);
  k->set_l0a_kib(64);
  k->set_l0b_kib(64);
  k->set_l0c_kib(256);
  k->set_ub_kib(256);
  k->set_mte2_bytes_per_cycle(256);
  k->set_mte1_bytes_per_cycle(512);
  k->set_mte3_bytes_per_cycle(256);
  k->set_fixp_bytes_per_cycle(256);
  k->set_mte_burst_cycles(0);
  k->set_scalar_latency_cycles(1);
  k->set_mte1_latency_cycles(20);
  k->set_mte2_latency_cycles(50);
  k->set_mte3_latency_cycles(50);
  k->set_cube_latency_cycles(10);
  k->set_vector_latency_cycles(8);
  k->set_fixp_latency_cycles(20);
  k->set_flag_latency_cycles(1);
  k->set_pipe_queue_depth(32);
  Aicpu* a = m.mutable_aicpu();
  a->set_cores(4);
  a->set_clock_mhz(1900);
  a->set_ops_per_cycle(4);
  a->set_launch_cycles(5000);
  HostLink* h = m.mutable_host_link();
  h->set_bandwidth_gbps(32);
  h->set_latency_us(2);
  ChipLinks* l = m.mutable_chip_links();
  l->set_count(7);
  l->set_bandwidth_gbps(30);
  l->set_latency_us(1);
  return m;
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
    bool may_be_zero = name.find("latency") != std::string::npos || name == "chip_links.count" ||
                       name == "core.mte_burst_cycles";
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open machine file '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMachine(ss.str(), path);
}

double HbmBytesPerCycle(const Machine& m) { return m.chip().hbm_bandwidth_gbps() * 1e3 / m.chip().clock_mhz(); }
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
