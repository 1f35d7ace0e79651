//===- core_state.h - The state the AI cores run on -------------*- C++ -*-===//
//
// A kernel launch in flight (its blocks, taken by the cores as they free)
// and each AI core's state: its pipes' queues and clocks, its flags, its
// local buffers and the block it runs. The cores' pipes (core_pipes.cc) run
// on it, the streams (streams.cc) launch kernels into it, and the chip
// (device.cc) resets it between runs. Internal to sim/model: it includes
// SystemC.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>
#include <systemc>

#include "sim/isa/isa.h"
#include "sim/model/device.h"
#include "sim/model/exec.h"

namespace kiln::sim {

using sc_core::sc_event;

struct Issued {
  const Inst* in;
  int32_t pc;
  double issue;  // cycles
  std::array<int64_t, 4> addr;
};

struct LaunchState {
  const Program* prog = nullptr;
  KernelStats* stats = nullptr;
  int64_t block_dim = 0;
  int64_t next_block = 0;
  int64_t done_blocks = 0;
  std::vector<uint8_t*> gm;
  std::vector<uint64_t> gm_dev;  // the arguments' device addresses (for the L2)
  sc_event done_ev;
  bool finished = false;
  std::set<int> cores;
  bool computes = false;  // computes its values in a timing-only run too (Device::Launch)
  // sync_all: the blocks waiting at the current barrier, and the barriers
  // released so far (a waiting block resumes when the count moves on).
  int64_t sync_arrived = 0;
  int64_t sync_released = 0;
  sc_event sync_ev;
};

// A FIFO in a ring of power-of-two capacity that grows when full and never
// shrinks: a pipe's queue and its pop times stay within the queue depth, so
// after the first instructions they cost no allocation.
template <typename T>
class Ring {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& front() { return buf_[head_ & mask_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  void pop_front() { ++head_; }
  void push_back(const T& v) {
    if (size() == buf_.size()) Grow();
    buf_[tail_++ & mask_] = v;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  void Grow() {
    std::vector<T> b(buf_.empty() ? 64 : 2 * buf_.size());
    for (size_t i = 0; i < size(); ++i) b[i] = (*this)[i];
    tail_ = size();
    head_ = 0;
    buf_.swap(b);
    mask_ = buf_.size() - 1;
  }
  std::vector<T> buf_;
  size_t head_ = 0, tail_ = 0, mask_ = 0;
};

struct PipeState {
  Ring<Issued> q;
  Ring<double> pop_times;  // when the pipe took recent instructions (for the scalar unit's view)
  sc_event pushed, popped;
  bool busy = false;
  double local = 0;  // cycles: the pipe's own clock, at or ahead of simulated time
  double done = 0;   // cycles: when everything issued to this pipe has completed
  const Issued* waiting = nullptr;  // the wait_flag it is blocked in, for deadlock reports
};

// The sets of one flag not yet consumed: when each becomes visible, and its
// trace flow id. Only one pipe sets a flag and one waits on it, in program
// order, so the times are increasing.
struct FlagQueue {
  std::vector<std::pair<double, int64_t>> sets;
  size_t head = 0;
  bool empty() const { return head == sets.size(); }
  void clear() { sets.clear(); head = 0; }
};

struct CoreState {
  int id = 0;
  std::array<PipeState, kNumPipes> pipes;
  FlagQueue flags[kNumPipes][kNumPipes][kNumEvents];
  sc_event flag_ev[kNumPipes];
  sc_event idle_ev;
  std::array<std::vector<uint8_t>, 7> buf;
  ExecContext ctx;
  LaunchState* launch = nullptr;
  int64_t block = -1;
  std::vector<int64_t> regs;
  int32_t scalar_pc = -1;
  const char* scalar_state = nullptr;  // why the scalar unit is blocked, for deadlock reports
  std::array<int64_t, 7> footprint{};
  std::array<PipeStats, kNumPipes> stats{};
};

}  // namespace kiln::sim
