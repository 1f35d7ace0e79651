//===- pipe_sync.h - Flags derived from what instructions touch -*- C++ -*-===//
//
// A straight-line stretch of an AI-core program, written as instructions
// on their pipes with the buffers each reads and writes (named freely:
// "L1.k0", "UB.s1", "GM.p0"), and given back as .kasm text with the
// set_flag / wait_flag pairs that order them: wherever an instruction
// reads what another pipe wrote, or writes what another pipe read or
// wrote, it waits for a flag that pipe sets right after the earlier
// instruction. A wait that what the pipe already waited for implies
// (directly or through a third pipe) is left out. Each channel (source,
// destination) uses one event id: its flags are set in the source's
// program order and awaited in the same order, so the counting flags pair
// up, and every flag set is consumed within the stretch.
//
// The pipes run as far ahead as these flags let them: the order in which
// the instructions are added is the schedule (a software pipeline is
// written by adding the next tile's cube work before this tile's vector
// work).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "sim/isa/isa.h"

namespace kiln::target::npusim {

class PipeSync {
 public:
  // One instruction (a line of .kasm without indentation) on pipe `p`.
  void Add(sim::Pipe p, std::string text, const std::vector<std::string>& reads,
           const std::vector<std::string>& writes);
  // Each non-empty line of `text` (an emitter's indented .kasm) as one
  // instruction on pipe `p` touching the same buffers.
  void AddLines(sim::Pipe p, absl::string_view text, const std::vector<std::string>& reads,
                const std::vector<std::string>& writes);
  // The stretch with its flags, each line indented; `id` is the event id
  // of every channel.
  std::string Emit(int id = 0) const;

 private:
  struct Inst {
    sim::Pipe pipe;
    std::string text;
    std::vector<int> reads, writes;
  };
  int Resource(const std::string& name);
  std::vector<Inst> insts_;
  absl::flat_hash_map<std::string, int> resources_;
};

}  // namespace kiln::target::npusim
