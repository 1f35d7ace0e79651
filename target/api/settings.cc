//===- settings.cc - Checking a target's settings -------------------------===//
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "target/api/target.h"

namespace kiln::target {

absl::Status CheckSettings(const CompileOptions& options, const TargetDescription& description) {
  for (const auto& [key, value] : options.settings) {
    const SettingSpec* spec = nullptr;
    for (const SettingSpec& s : description.settings)
      if (s.name == key) spec = &s;
    if (!spec) {
      std::string takes;
      for (const SettingSpec& s : description.settings) absl::StrAppend(&takes, takes.empty() ? "--" : ", --", s.name);
      return absl::InvalidArgumentError(absl::StrCat("--", key, " is not a setting of target ", description.name,
                                                     " (it takes ", takes.empty() ? "no settings" : takes, ")"));
    }
    int64_t n = 0;
    bool b = false;
    if ((spec->type == SettingSpec::Type::kInt && !absl::SimpleAtoi(value, &n)) ||
        (spec->type == SettingSpec::Type::kBool && !absl::SimpleAtob(value, &b)) ||
        (spec->type != SettingSpec::Type::kString && value.empty()))
      return absl::InvalidArgumentError(absl::StrCat(
          "--", key, "=", value, ": target ", description.name, " takes ",
          spec->type == SettingSpec::Type::kInt    ? "an integer"
          : spec->type == SettingSpec::Type::kBool ? "true or false"
                                                   : "a file name",
          " there"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::target
