//===- vector_kasm.cc - A .kasm text builder for the vector kernels -------===//
#include "target/npusim/kernels/vector_kasm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"

namespace kiln::target::npusim::vec {

std::string UbText(Ub u) {
  if (u.reg < 0) return absl::StrCat("UB[", u.off, "]");
  if (u.off == 0) return absl::StrCat("UB[r", u.reg, "]");
  return absl::StrCat("UB[r", u.reg, " + ", u.off, "]");
}

std::string FloatImm(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return absl::StrFormat("%.17g", v);
}

namespace {

std::string GmText(absl::string_view arg, int reg, int64_t off) {
  if (reg < 0) return absl::StrCat(arg, "[", off, "]");
  if (off == 0) return absl::StrCat(arg, "[r", reg, "]");
  return absl::StrCat(arg, "[r", reg, " + ", off, "]");
}


}  // namespace

Kasm::Kasm(std::string name, const sim::Machine& machine) : machine_(machine), name_(std::move(name)) {}

int Kasm::Reg() { return next_reg_++; }

std::string Kasm::NewLabel(absl::string_view stem) { return absl::StrCat(stem, "_", next_label_++); }

void Kasm::Label(const std::string& label) { lines_.push_back(absl::StrCat(label, ":")); }

void Kasm::Op(std::string text) { lines_.push_back(absl::StrCat("  ", text)); }

void Kasm::Mov(int rd, int64_t v) { Op(absl::StrCat("mov r", rd, ", ", v)); }

void Kasm::Alu(absl::string_view op, int rd, int ra, int64_t imm) {
  Op(absl::StrCat(op, " r", rd, ", r", ra, ", ", imm));
}

void Kasm::AluR(absl::string_view op, int rd, int ra, int rb) {
  Op(absl::StrCat(op, " r", rd, ", r", ra, ", r", rb));
}

void Kasm::CopyIn(Ub dst, absl::string_view arg, int gm_reg, int64_t gm_off, int64_t len, int64_t nburst,
                  int64_t src_stride, int64_t dst_stride) {
  ++copies_in_;
  std::string s = absl::StrCat("copy_gm_ub ", UbText(dst), ", ", GmText(arg, gm_reg, gm_off), ", len=", len);
  if (nburst != 1) absl::StrAppend(&s, ", nburst=", nburst);
  if (src_stride >= 0 && src_stride != len) absl::StrAppend(&s, ", src_stride=", src_stride);
  if (dst_stride >= 0 && dst_stride != len) absl::StrAppend(&s, ", dst_stride=", dst_stride);
  Op(std::move(s));
}

void Kasm::CopyOut(absl::string_view arg, int gm_reg, int64_t gm_off, Ub src, int64_t len, int64_t nburst,
                   int64_t src_stride, int64_t dst_stride) {
  std::string s = absl::StrCat("copy_ub_gm ", GmText(arg, gm_reg, gm_off), ", ", UbText(src), ", len=", len);
  if (nburst != 1) absl::StrAppend(&s, ", nburst=", nburst);
  if (src_stride >= 0 && src_stride != len) absl::StrAppend(&s, ", src_stride=", src_stride);
  if (dst_stride >= 0 && dst_stride != len) absl::StrAppend(&s, ", dst_stride=", dst_stride);
  Op(std::move(s));
}

void Kasm::SetFlag(absl::string_view src, absl::string_view dst, int id) {
  Op(absl::StrCat("set_flag ", src, ", ", dst, ", ", id));
}

void Kasm::WaitFlag(absl::string_view src, absl::string_view dst, int id) {
  Op(absl::StrCat("wait_flag ", src, ", ", dst, ", ", id));
}

void Kasm::VecOne(absl::string_view mnemonic, VArg dst, const std::vector<VArg>& srcs, int dst_es,
                  const std::vector<int>& src_es, int64_t repeat, int64_t mask, int64_t epr,
                  std::optional<double> imm, absl::string_view extra) {
  std::string s = absl::StrCat(mnemonic, " ", UbText(dst.at));
  for (const VArg& a : srcs) absl::StrAppend(&s, ", ", UbText(a.at));
  if (imm) absl::StrAppend(&s, ", ", FloatImm(*imm));
  if (repeat != 1) absl::StrAppend(&s, ", repeat=", repeat);
  if (mask != epr) absl::StrAppend(&s, ", mask=", mask);
  if (dst.bcast) absl::StrAppend(&s, ", dst_blk_stride=0, dst_rep_stride=0");
  for (size_t k = 0; k < srcs.size(); ++k)
    if (srcs[k].bcast) absl::StrAppend(&s, ", src", k, "_blk_stride=0, src", k, "_rep_stride=0");
  if (!extra.empty()) absl::StrAppend(&s, ", ", extra);
  Op(std::move(s));
  // Its cost by the model's own rule for the op the mnemonic names.
  sim::Op op = sim::Op::kVadd;
  sim::FindOp(std::string(mnemonic.substr(0, mnemonic.find('.'))), &op);
  vector_cycles_ += static_cast<double>(machine_.core().vector_latency_cycles()) +
                    sim::VectorInstructionCycles(machine_, op, static_cast<int>(256 / std::max<int64_t>(epr, 1)), repeat);
  (void)dst_es;
  (void)src_es;
}

namespace {

// Splits n elements into instructions: calls f(element offset, repeat, mask).
template <typename F>
void Split(int64_t n, int64_t epr, F f) {
  int64_t full = n / epr, done = 0;
  while (done < full) {
    int64_t r = std::min<int64_t>(255, full - done);
    f(done * epr, r, epr);
    done += r;
  }
  if (n % epr) f(full * epr, 1, n % epr);
}

VArg Advance(VArg a, int64_t bytes) { return a.bcast ? a : VArg{a.at.Plus(bytes), false}; }

}  // namespace

void Kasm::Vec(absl::string_view op, sim::DType dt, VArg dst, const std::vector<VArg>& srcs, int64_t n,
               std::optional<double> imm) {
  if (n <= 0) return;
  int es = sim::DTypeSize(dt);
  int64_t epr = 256 / es;
  std::string mn = absl::StrCat(op, ".", sim::DTypeName(dt));
  Split(n, epr, [&](int64_t e, int64_t rep, int64_t mask) {
    std::vector<VArg> s;
    for (const VArg& a : srcs) s.push_back(Advance(a, e * es));
    VecOne(mn, Advance(dst, e * es), s, es, {}, rep, mask, epr, imm, "");
  });
}

void Kasm::Conv(sim::DType to, sim::DType from, VArg dst, VArg src, int64_t n, absl::string_view round) {
  if (n <= 0) return;
  int des = sim::DTypeSize(to), ses = sim::DTypeSize(from);
  int64_t epr = 256 / std::max(des, ses);
  std::string mn = absl::StrCat("vconv.", sim::DTypeName(to), ".", sim::DTypeName(from));
  std::string extra = round.empty() ? "" : absl::StrCat("round=", round);
  Split(n, epr, [&](int64_t e, int64_t rep, int64_t mask) {
    VecOne(mn, Advance(dst, e * des), {Advance(src, e * ses)}, des, {ses}, rep, mask, epr, std::nullopt, extra);
  });
}

void Kasm::Raw(absl::string_view mnemonic, Ub dst, const std::vector<Ub>& srcs, int64_t repeat, int64_t mask,
               int64_t epr, absl::string_view extra, std::optional<double> imm) {
  std::vector<VArg> s;
  for (const Ub& u : srcs) s.push_back(V(u));
  VecOne(mnemonic, V(dst), s, 0, {}, repeat, mask, epr, imm, extra);
}

void Kasm::CopyBits(sim::DType dt, Ub dst, Ub src, int64_t n) {
  int64_t words = CeilDiv(n * sim::DTypeSize(dt), 4);
  Vec("vmov", sim::DType::kS32, V(dst), {V(src)}, words);
}

void Kasm::Reduce(absl::string_view op, sim::DType dt, Ub dst, Ub src, int64_t repeat, int64_t mask) {
  int64_t epr = 256 / sim::DTypeSize(dt);
  VecOne(absl::StrCat(op, ".", sim::DTypeName(dt)), V(dst), {V(src)}, 0, {}, repeat, mask, epr, std::nullopt, "");
}

void Kasm::Brcb(sim::DType dt, Ub dst, Ub src, int64_t repeat) {
  std::string s = absl::StrCat("vbrcb.", sim::DTypeName(dt), " ", UbText(dst), ", ", UbText(src));
  if (repeat != 1) absl::StrAppend(&s, ", repeat=", repeat);
  Op(std::move(s));
  vector_cycles_ += static_cast<double>(machine_.core().vector_latency_cycles() + repeat);
}

std::string Kasm::Text() const {
  std::string t = absl::StrCat(".program ", name_, "\n.regs ", std::max(next_reg_, 1), "\n");
  for (const std::string& a : args_) absl::StrAppend(&t, a, "\n");
  for (const std::string& l : lines_) absl::StrAppend(&t, l, "\n");
  return t;
}

absl::StatusOr<sim::Program> Kasm::Finish() const {
  auto file = sim::Assemble(Text(), absl::StrCat(name_, ".kasm"));
  if (!file.ok())
    return absl::InternalError(absl::StrCat("vector kernel ", name_, " does not assemble: ", file.status().message()));
  return file->program;
}

}  // namespace kiln::target::npusim::vec
