//===- sweep_grid.cc - The machines of a design-space sweep ---------------===//
#include "tools/kiln/sweep_grid.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/machine/machine.h"

namespace kiln::cli {
namespace {

using google::protobuf::FieldDescriptor;

// The message holding the field at `path` and the field, or an error naming
// the fields there are.
absl::Status Resolve(const google::protobuf::Descriptor* d, const std::string& path, const FieldDescriptor** field,
                     std::vector<const FieldDescriptor*>* messages) {
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = d->FindFieldByName(parts[i]);
    const bool last = i + 1 == parts.size();
    if (!f || (last == (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)) ||
        (last && f->cpp_type() == FieldDescriptor::CPPTYPE_STRING)) {
      std::vector<std::string> names;
      for (int k = 0; k < d->field_count(); ++k) {
        const FieldDescriptor* c = d->field(k);
        if (c->cpp_type() == FieldDescriptor::CPPTYPE_STRING) continue;
        names.push_back(c->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ? absl::StrCat(c->name(), ".*") : c->name());
      }
      const std::string where = i == 0 ? "the machine description" : absl::StrJoin(parts.begin(), parts.begin() + i, ".");
      return absl::InvalidArgumentError(absl::StrCat("--set: '", path, "' is not a numeric field of the machine (",
                                                     where, " has ", absl::StrJoin(names, ", "), ")"));
    }
    if (last) {
      *field = f;
      return absl::OkStatus();
    }
    messages->push_back(f);
    d = f->message_type();
  }
  return absl::InvalidArgumentError("--set: an empty field");
}

}  // namespace

absl::Status SetMachineField(sim::Machine* m, const std::string& path, const std::string& value) {
  const FieldDescriptor* field = nullptr;
  std::vector<const FieldDescriptor*> messages;
  if (absl::Status s = Resolve(sim::Machine::descriptor(), path, &field, &messages); !s.ok()) return s;
  google::protobuf::Message* msg = m;
  for (const FieldDescriptor* f : messages) msg = msg->GetReflection()->MutableMessage(msg, f);
  const auto* r = msg->GetReflection();
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("--set: ", path, " takes ", what, ", not '", value, "'"));
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad("an integer");
      r->SetInt32(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad("an integer");
      r->SetInt64(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = 0;
      if (!absl::SimpleAtod(value, &v)) return bad("a number");
      r->SetDouble(msg, field, v);
      break;
    }
    default: return bad("a number");
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepAxis> ParseSweepAxis(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return absl::InvalidArgumentError(absl::StrCat("--set takes FIELD=V1,V2,... (core.l1_kib=512,1024), not '", spec, "'"));
  SweepAxis axis;
  axis.field = spec.substr(0, eq);
  for (absl::string_view v : absl::StrSplit(spec.substr(eq + 1), ',')) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--set ", spec, ": an empty value"));
    axis.values.emplace_back(v);
  }
  // Each value must be one the field takes (on a scratch machine).
  sim::Machine scratch;
  for (const std::string& v : axis.values)
    if (absl::Status s = SetMachineField(&scratch, axis.field, v); !s.ok()) return s;
  return axis;
}

absl::StatusOr<std::vector<SweepPointSpec>> SweepGrid(const sim::Machine& base, const std::vector<SweepAxis>& axes,
                                                     int max_points) {
  int64_t count = 1;
  for (const SweepAxis& a : axes) {
    count *= static_cast<int64_t>(a.values.size());
    if (count > max_points)
      return absl::InvalidArgumentError(absl::StrCat("the grid has more than ", max_points,
                                                     " points (--max-points raises the bound)"));
  }
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axes[i].field == axes[j].field)
        return absl::InvalidArgumentError(absl::StrCat("--set ", axes[i].field, " is given twice"));
  std::vector<SweepPointSpec> points;
  std::vector<size_t> at(axes.size(), 0);
  for (int64_t p = 0; p < count; ++p) {
    SweepPointSpec point;
    point.machine = base;
    for (size_t i = 0; i < axes.size(); ++i) {
      point.values.push_back(axes[i].values[at[i]]);
      if (absl::Status s = SetMachineField(&point.machine, axes[i].field, axes[i].values[at[i]]); !s.ok()) return s;
    }
    if (absl::Status s = sim::ValidateMachine(point.machine); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("the point ", absl::StrJoin(point.values, ", "), " is not a valid machine: ", s.message()));
    points.push_back(std::move(point));
    for (size_t i = axes.size(); i-- > 0;) {
      if (++at[i] < axes[i].values.size()) break;
      at[i] = 0;
    }
  }
  return points;
}

}  // namespace kiln::cli
