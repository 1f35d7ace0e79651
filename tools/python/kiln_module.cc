//===- kiln_module.cc - The extension under Python's `kiln` module ---------===//
//
// `_kiln`: compiling a model file into an artifact (tools/driver, as `kiln
// compile` does) and running an artifact through its target's executable
// (as `kiln run` does), with NumPy arrays in and out. tools/python/kiln/
// __init__.py is the API users see; every kiln error arrives as kiln.Error
// carrying kiln's one-line message.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/checked_math.h"
#include "graph/verifier/verifier.h"
#include "target/api/executable.h"
#include "target/api/target_registry.h"
#include "target/api/version.h"
#include "target/precision.h"
#include "tools/driver/compile_model.h"
#include "tools/driver/load_artifact.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// kiln.Error: what every failure raises, with kiln's message.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(const absl::Status& s) {
  if (!s.ok()) throw Error(std::string(s.message()));
}
template <typename T>
T Check(absl::StatusOr<T> s) {
  if (!s.ok()) throw Error(std::string(s.status().message()));
  return *std::move(s);
}

// A kiln warning as a Python warning (from any thread of kiln's).
void Warn(const std::string& w) {
  py::gil_scoped_acquire locked;
  py::module_::import("warnings").attr("warn")(w);
}

void SetUp() { Check(driver::SetUpTargets({}, Warn)); }

// libkiln_hostops.so beside an installed module (PREFIX/lib/python3/
// dist-packages/kiln/_kiln*.so -> PREFIX/lib), else where the build made it.
std::string HostOpsLibraryPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&HostOpsLibraryPath), &info) && info.dli_fname) {
    std::error_code ec;
    const std::filesystem::path lib =
        std::filesystem::path(info.dli_fname).parent_path().parent_path().parent_path().parent_path() /
        "libkiln_hostops.so";
    if (std::filesystem::exists(lib, ec)) return lib.string();
  }
  return KILN_HOSTOPS_LIBRARY_PATH;
}

target::Precision PrecisionOf(const std::string& p) {
  if (p == "fp32") return target::Precision::kFp32;
  if (p == "fp16") return target::Precision::kFp16;
  if (p == "bf16") return target::Precision::kBf16;
  if (p == "mixed") return target::Precision::kMixed;
  throw Error("precision must be fp32, fp16, bf16 or mixed, not '" + p + "'");
}

// Compiles the model at `model_path` for `target_name` into `out`; returns
// the placement's explanation when `explain`.
std::string Compile(const std::string& model_path, const std::string& out, const std::string& target_name,
                    const std::string& precision, bool fusion, const std::string& passes,
                    const std::vector<std::pair<std::string, std::string>>& settings, bool explain) {
  SetUp();
  std::unique_ptr<target::Target> target = Check(target::TargetRegistry::Global().Create(target_name));
  const target::TargetDescription& description = target->description();
  driver::CompileJob job;
  job.model_name = model_path;
  job.target = target.get();
  job.options.precision = PrecisionOf(precision);
  job.options.narrow = target::NarrowingFor(job.options.precision);
  job.options.fusion = fusion;
  job.options.settings = settings;
  Check(target::CheckSettings(job.options, description));
  job.options.warn = Warn;
  job.options.host_ops_library = HostOpsLibraryPath();
  job.pipeline = passes == "default" ? driver::PipelineFor(description, fusion) : passes;
  job.run_pipeline = [](Model& m, const std::string& pipeline) {
    return driver::RunPipeline(m, pipeline, PassOptions());
  };
  job.explain = explain;
  Model model = Check(driver::LoadModel(model_path));
  Check(VerifyModel(model));
  std::string explanation;
  Check(driver::CompileModelInto(model, job, out, &explanation));
  return explanation;
}

// NumPy's dtype of a kiln dtype (bf16 has none: its values come back as f32).
py::dtype NumpyDType(DType t) {
  switch (t) {
    case DType::kF32: case DType::kBF16: return py::dtype("float32");
    case DType::kF16: return py::dtype("float16");
    case DType::kF64: return py::dtype("float64");
    case DType::kI8: return py::dtype("int8");
    case DType::kI16: return py::dtype("int16");
    case DType::kI32: return py::dtype("int32");
    case DType::kI64: return py::dtype("int64");
    case DType::kU8: return py::dtype("uint8");
    case DType::kU16: return py::dtype("uint16");
    case DType::kU32: return py::dtype("uint32");
    case DType::kU64: return py::dtype("uint64");
    case DType::kBool: return py::dtype("bool");
    case DType::kC64: return py::dtype("complex64");
    case DType::kC128: return py::dtype("complex128");
    default: throw Error(absl::StrCat("a ", DTypeName(t), " tensor has no NumPy form here"));
  }
}

DType KilnDType(const py::dtype& d) {
  const char kind = d.kind();
  const int64_t size = static_cast<int64_t>(d.itemsize());
  if (kind == 'f' && size == 2) return DType::kF16;
  if (kind == 'f' && size == 4) return DType::kF32;
  if (kind == 'f' && size == 8) return DType::kF64;
  if (kind == 'i' && size == 1) return DType::kI8;
  if (kind == 'i' && size == 2) return DType::kI16;
  if (kind == 'i' && size == 4) return DType::kI32;
  if (kind == 'i' && size == 8) return DType::kI64;
  if (kind == 'u' && size == 1) return DType::kU8;
  if (kind == 'u' && size == 2) return DType::kU16;
  if (kind == 'u' && size == 4) return DType::kU32;
  if (kind == 'u' && size == 8) return DType::kU64;
  if (kind == 'b') return DType::kBool;
  if (kind == 'c' && size == 8) return DType::kC64;
  if (kind == 'c' && size == 16) return DType::kC128;
  throw Error(absl::StrCat("NumPy dtype ", py::repr(d).cast<std::string>(), " has no kiln dtype"));
}

Tensor ToTensor(const py::handle& obj, const std::string& name) {
  py::array a = py::array::ensure(obj, py::array::c_style);
  if (!a) throw Error(absl::StrCat("input '", name, "' is not an array"));
  Dims dims(a.shape(), a.shape() + a.ndim());
  if (!ElementCount(dims, "input").ok()) throw Error(absl::StrCat("input '", name, "' is too large"));
  Tensor t(KilnDType(a.dtype()), dims);
  if (t.nbytes() != static_cast<size_t>(a.nbytes())) throw Error(absl::StrCat("input '", name, "': size mismatch"));
  if (t.nbytes() > 0) std::memcpy(t.raw(), a.data(), t.nbytes());
  return t;
}

py::array ToArray(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end());
  if (t.dtype() == DType::kBF16) {
    py::array_t<float> a(shape);
    float* out = a.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<float>(t.GetDouble(i));
    return a;
  }
  py::array a(NumpyDType(t.dtype()), shape);
  if (t.nbytes() > 0) std::memcpy(a.mutable_data(), t.raw(), t.nbytes());
  return a;
}

// A loaded artifact: its target's executable.
// The report kinds by the names Compiled.report takes.
constexpr std::pair<const char*, target::ReportKind> kReportKinds[] = {
    {"text", target::ReportKind::kText},
    {"csv", target::ReportKind::kCsv},
    {"tasks", target::ReportKind::kTasksCsv},
    {"trace", target::ReportKind::kTraceJson},
    {"trace_gz", target::ReportKind::kTraceJsonGz},
    {"trace_perfetto", target::ReportKind::kTracePerfetto},
    {"roofline_svg", target::ReportKind::kRooflineSvg},
    {"roofline_csv", target::ReportKind::kRooflineCsv}};

class Compiled {
 public:
  explicit Compiled(const std::string& path) : path_(path) {
    SetUp();
    std::unique_ptr<target::Target> target = Check(driver::TargetOfArtifact(path));
    target_ = target->description().name;
    exe_ = Check(target->Load(path));
  }

  const std::string& target() const { return target_; }

  std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> Specs(bool inputs) const {
    std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> out;
    for (const target::TensorSpec& s : inputs ? exe_->inputs() : exe_->outputs())
      out.emplace_back(s.name, std::string(DTypeName(s.dtype)), s.dims);
    return out;
  }

  py::dict Features() const {
    const target::RunFeatures f = exe_->features();
    py::dict d;
    d["trace"] = f.trace;
    d["report"] = f.report;
    d["roofline"] = f.roofline;
    d["timing_only"] = f.timing_only;
    return d;
  }

  // Runs `inputs` (by position, signature order; None: the input's initial
  // value); the outputs, or None for each under `timing_only`.
  py::list Run(const py::list& inputs, bool timing_only, bool trace) {
    const std::vector<target::TensorSpec>& specs = exe_->inputs();
    if (static_cast<size_t>(py::len(inputs)) != specs.size())
      throw Error(absl::StrCat("the model takes ", specs.size(), " inputs, got ", py::len(inputs)));
    std::vector<Tensor> initial = exe_->InitialValues();
    std::vector<Tensor> in;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (inputs[i].is_none()) {
        if (i >= initial.size() || !initial[i].defined()) throw Error(absl::StrCat("missing input '", specs[i].name, "'"));
        in.push_back(initial[i]);
      } else {
        in.push_back(ToTensor(inputs[i], specs[i].name));
      }
    }
    const target::RunFeatures f = exe_->features();
    if (timing_only && !f.timing_only) throw Error(absl::StrCat("runs of target ", target_, " have no timing-only mode"));
    if (trace && !f.trace) throw Error(absl::StrCat("runs of target ", target_, " have no trace"));
    target::RunOptions options;
    options.functional = !timing_only;
    options.trace = trace;
    std::vector<Tensor> out;
    {
      py::gil_scoped_release unlocked;
      absl::StatusOr<std::string> plan = exe_->Prepare(in, options);
      if (plan.ok()) {
        absl::StatusOr<std::vector<Tensor>> r = exe_->Run(std::move(in), options);
        if (!r.ok()) plan = r.status();
        else out = *std::move(r);
      }
      if (!plan.ok()) {
        py::gil_scoped_acquire locked;
        throw Error(std::string(plan.status().message()));
      }
    }
    py::list result;
    for (const Tensor& t : out) {
      if (timing_only) result.append(py::none());
      else result.append(ToArray(t));
    }
    return result;
  }

  py::bytes Report(const std::string& kind) const { return py::bytes(ReportText(kind)); }

  std::string ReportText(const std::string& kind) const {
    for (const auto& [name, k] : kReportKinds)
      if (kind == name) {
        const bool trace = k == target::ReportKind::kTraceJson || k == target::ReportKind::kTraceJsonGz ||
                           k == target::ReportKind::kTracePerfetto;
        if (!exe_->features().report && !trace)
          throw Error(absl::StrCat("runs of target ", target_, " have no reports"));
        return Check(exe_->Report(k, std::filesystem::path(path_).filename().string()));
      }
    throw Error(
        "report kind must be text, csv, tasks, trace, trace_gz, trace_perfetto, roofline_svg or roofline_csv, not '" +
        kind + "'");
  }

 private:
  std::string path_, target_;
  std::unique_ptr<target::Executable> exe_;
};

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln's compiler and runtime (use the kiln package)";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  m.attr("version") = KILN_VERSION_STRING;
  m.attr("target_api_version") = KILN_TARGET_API_VERSION;
  m.def("compile", &Compile, py::arg("model_path"), py::arg("out"), py::arg("target"), py::arg("precision"),
        py::arg("fusion"), py::arg("passes"), py::arg("settings"), py::arg("explain"),
        py::call_guard<py::gil_scoped_release>());
  // The report kind of a trace written to `path` (by its name, as `kiln run --trace`).
  m.def("trace_kind", [](const std::string& path) {
    const kiln::target::ReportKind kind = kiln::target::TraceKindOf(path);
    for (const auto& [name, k] : kiln::python::kReportKinds)
      if (k == kind) return std::string(name);
    return std::string("trace");
  });
  m.def("artifact_suffix", [](const std::string& target_name) {
    SetUp();
    return Check(kiln::target::TargetRegistry::Global().Create(target_name))->description().artifact_suffix;
  });
  m.def("default_target", [] {
    SetUp();
    return kiln::target::TargetRegistry::Global().DefaultTarget();
  });
  m.def("targets", [] {
    SetUp();
    std::vector<std::string> names;
    for (const auto* e : kiln::target::TargetRegistry::Global().List()) names.push_back(e->name);
    return names;
  });
  py::class_<Compiled>(m, "Compiled")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("target", &Compiled::target)
      .def_property_readonly("inputs", [](const Compiled& c) { return c.Specs(true); })
      .def_property_readonly("outputs", [](const Compiled& c) { return c.Specs(false); })
      .def_property_readonly("features", &Compiled::Features)
      .def("run", &Compiled::Run, py::arg("inputs"), py::arg("timing_only") = false, py::arg("trace") = false)
      .def("report", &Compiled::Report, py::arg("kind"));  // bytes: a gzip'd trace is not text
}
