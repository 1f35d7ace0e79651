//===- group_settles.h - What a fixpoint group skips has nothing to do -*- C++ -*-===//
//
// The pass manager skips a pass after changes that cannot give it work
// (Pass::woken_by) and after its own settled changes. The pass tests check
// those claims: once the default pipeline's fixpoint group ends, none of
// its passes finds anything to do when run alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "graph/passes/pass_manager.h"
#include "gtest/gtest.h"

namespace kiln {

// The default pipeline's passes up to the end of its fixpoint group.
inline constexpr char kUpToFixpoint[] =
    "dedup-constants,infer-shapes,fixpoint(fold-constants,infer-shapes,simplify,eliminate-dead-branches,cse,dce)";
// The group's passes (dedup-constants, before the group, may find
// duplicates among the constants folding made: the pipeline runs it again).
inline const char* const kGroupPasses[] = {"fold-constants", "infer-shapes", "simplify", "eliminate-dead-branches",
                                           "cse", "dce"};

// The pass manager skips a pass after changes that cannot give it work
// (Pass::woken_by) and after its own settled changes: once the group ends,
// none of its passes may find anything to do, run alone. Returns how many
// passes were checked (0 when the group itself fails, as on error tests).
inline int CheckGroupSettles(Model& model, const std::string& what) {
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline(kUpToFixpoint).ok());
  if (!pm.Run(model).ok()) return 0;
  int checked = 0;
  for (const char* pass : kGroupPasses) {
    PassManager alone;
    EXPECT_TRUE(alone.AddPipeline(pass).ok());
    auto changed = alone.Run(model);
    EXPECT_TRUE(changed.ok()) << what << ": " << pass << ": " << changed.status();
    EXPECT_FALSE(changed.ok() && *changed) << what << ": " << pass << " still changes the graph after the group";
    ++checked;
  }
  return checked;
}

}  // namespace kiln
