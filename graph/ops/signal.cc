//===- signal.cc - DFT, STFT and MelWeightMatrix --------------------------===//
//
// The signal operators: DFT and STFT (radix-2 for powers of two, a direct
// sum for short other lengths, Bluestein's chirp-z for long ones) and
// MelWeightMatrix.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

constexpr double kPi = 3.14159265358979323846;

//===--- DFT, STFT, MelWeightMatrix ---------------------------------------===//

using Complex = std::complex<double>;

// Unnormalized radix-2 FFT of a power-of-two size, with e^{sign 2 pi i jk/n}.
class Radix2 {
 public:
  Radix2(int64_t n, double sign) : n_(n), twiddle_(n / 2) {
    for (int64_t k = 0; k < n / 2; ++k) {
      double ang = sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n);
      twiddle_[k] = Complex(std::cos(ang), std::sin(ang));
    }
  }

  void Run(Complex* a) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      int64_t half = len / 2, step = n_ / len;
      for (int64_t i = 0; i < n_; i += len) {
        for (int64_t j = 0; j < half; ++j) {
          Complex u = a[i + j], v = a[i + j + half] * twiddle_[j * step];
          a[i + j] = u + v;
          a[i + j + half] = u - v;
        }
      }
    }
  }

 private:
  int64_t n_;
  std::vector<Complex> twiddle_;
};

// In-place DFT of `a` (any length n > 0): radix-2 for powers of two, a
// direct sum for short other lengths, Bluestein's chirp-z convolution for
// long ones. `inverse` uses e^{+i} and scales by 1/n.
class Fourier {
 public:
  Fourier(int64_t n, bool inverse) : n_(n), inverse_(inverse) {
    double sign = inverse ? 1.0 : -1.0;
    if (n <= 0) return;
    if ((n & (n - 1)) == 0) {
      fft_ = std::make_unique<Radix2>(n, sign);
    } else if (n <= 64) {
      twiddle_.resize(n);
      for (int64_t k = 0; k < n; ++k) {
        double ang = sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n);
        twiddle_[k] = Complex(std::cos(ang), std::sin(ang));
      }
    } else {
      // X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), w_k = e^{sign i pi k^2 / n}.
      m_ = 1;
      while (m_ < 2 * n - 1) m_ <<= 1;
      fft_ = std::make_unique<Radix2>(m_, -1.0);
      ifft_ = std::make_unique<Radix2>(m_, 1.0);
      chirp_.resize(n);
      for (int64_t k = 0; k < n; ++k) {
        int64_t k2 = static_cast<int64_t>((static_cast<unsigned __int128>(k) * k) % (2 * n));
        double ang = sign * kPi * static_cast<double>(k2) / static_cast<double>(n);
        chirp_[k] = Complex(std::cos(ang), std::sin(ang));
      }
      kernel_.assign(m_, Complex(0));
      kernel_[0] = std::conj(chirp_[0]);
      for (int64_t k = 1; k < n; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
      fft_->Run(kernel_.data());
    }
    tmp_.resize(std::max(n, m_));
  }

  void Run(std::vector<Complex>& a) {
    if (n_ <= 0) return;
    if (m_ > 0) Bluestein(a);
    else if (fft_) fft_->Run(a.data());
    else Direct(a);
    if (inverse_)
      for (Complex& v : a) v /= static_cast<double>(n_);
  }

 private:
  void Direct(std::vector<Complex>& a) {
    for (int64_t k = 0; k < n_; ++k) {
      Complex s = 0;
      int64_t idx = 0;
      for (int64_t j = 0; j < n_; ++j) {
        s += a[j] * twiddle_[idx];
        idx += k;
        if (idx >= n_) idx -= n_;
      }
      tmp_[k] = s;
    }
    std::copy(tmp_.begin(), tmp_.begin() + n_, a.begin());
  }

  void Bluestein(std::vector<Complex>& a) {
    std::fill(tmp_.begin(), tmp_.end(), Complex(0));
    for (int64_t j = 0; j < n_; ++j) tmp_[j] = a[j] * chirp_[j];
    fft_->Run(tmp_.data());
    for (int64_t i = 0; i < m_; ++i) tmp_[i] *= kernel_[i];
    ifft_->Run(tmp_.data());
    double scale = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) a[k] = tmp_[k] * scale * chirp_[k];
  }

  int64_t n_;
  bool inverse_;
  int64_t m_ = 0;  // Bluestein convolution size, 0 when unused
  std::unique_ptr<Radix2> fft_, ifft_;
  std::vector<Complex> twiddle_, chirp_, kernel_, tmp_;
};

// Longest transform accepted (its working buffers are a few times larger).
constexpr int64_t kMaxSignalLength = int64_t{1} << 24;

template <typename Ctx>
absl::StatusOr<int> DftAxis(const Ctx& ctx, int rank) {
  int64_t a = ctx.node().GetInt("axis", 1);
  if (rank < 2) return ctx.Error("the input has rank ", rank, "; it needs a signal axis and a last dim of 1 or 2");
  // The last dim holds the real and imaginary parts; it is not a signal axis.
  int64_t norm = a < 0 ? a + rank : a;
  if (norm < 0 || norm > rank - 2) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  return static_cast<int>(norm);
}

absl::Status InferDFT(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}))
    return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (!x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    return absl::OkStatus();
  }
  int rank = x.shape().rank();
  KILN_ASSIGN_OR_RETURN(int axis, DftAxis(ctx, rank));
  const Dim& last = x.shape()[rank - 1];
  if (last.is_static() && last.value() != 1 && last.value() != 2)
    return ctx.Error("the last dim must be 1 (real) or 2 (complex), got ", last.value());
  bool onesided = ctx.node().GetInt("onesided", 0) != 0;
  DimVector dims = x.shape().dims();
  Dim n = dims[axis];
  if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
    const Tensor* len = ctx.const_input(1);
    n = len && len->numel() == 1 ? Dim(len->GetInt(0)) : Dim();
  }
  if (onesided) n = n.is_static() ? Dim(n.value() / 2 + 1) : Dim();
  dims[axis] = n;
  dims[rank - 1] = Dim(2);
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
  return absl::OkStatus();
}

absl::Status DFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  int rank = x.rank();
  KILN_ASSIGN_OR_RETURN(int axis, DftAxis(ctx, rank));
  int64_t comps = x.dim(rank - 1);
  if (comps != 1 && comps != 2) return ctx.Error("the last dim must be 1 (real) or 2 (complex), got ", comps);
  bool inverse = ctx.node().GetInt("inverse", 0) != 0;
  bool onesided = ctx.node().GetInt("onesided", 0) != 0;
  if (onesided && comps == 2) return ctx.Error("onesided output needs a real input");
  if (onesided && inverse) return ctx.Error("onesided is not supported with inverse");
  int64_t in_len = x.dim(axis);
  int64_t n = in_len;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(ctx, ctx.input(1), "dft_length"));
    if (n < 1) return ctx.Error("dft_length must be positive, got ", n);
  }
  if (n > kMaxSignalLength) return ctx.Error("the DFT length ", n, " is too large");
  int64_t out_len = onesided ? n / 2 + 1 : n;
  Dims out_dims = x.dims();
  out_dims[axis] = out_len;
  out_dims[rank - 1] = 2;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_dims));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank - 1; ++i) inner *= x.dim(i);
  std::vector<double> xs = ToDoubleVector(x);
  Fourier f(n, inverse);
  std::vector<Complex> a(n);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::fill(a.begin(), a.end(), Complex(0));
        for (int64_t j = 0; j < std::min(n, in_len); ++j) {
          const double* p = &xs[((o * in_len + j) * inner + i) * comps];
          a[j] = Complex(p[0], comps == 2 ? p[1] : 0.0);
        }
        f.Run(a);
        for (int64_t k = 0; k < out_len; ++k) {
          T* q = out + ((o * out_len + k) * inner + i) * 2;
          q[0] = FromDouble<T>(a[k].real());
          q[1] = FromDouble<T>(a[k].imag());
        }
      }
    }
  });
  return absl::OkStatus();
}

OpCost DftCost(const Node& n) {
  OpCost c;
  Value* x = n.input(0);
  Value* y = n.output(0);
  int64_t in = x && x->type().is_tensor() ? x->type().shape().NumElements() : -1;
  int64_t out = y->type().is_tensor() ? y->type().shape().NumElements() : -1;
  if (in > 0) c.bytes_read = static_cast<double>(in) * DTypeSize(x->type().dtype());
  if (out > 0) {
    c.bytes_written = static_cast<double>(out) * DTypeSize(y->type().dtype());
    double len = 2;
    const Shape& s = y->type().shape();
    auto axis = NormalizeAxis(n.GetInt("axis", 1), s.rank());
    if (axis.ok() && s[*axis].is_static()) len = std::max<double>(2, static_cast<double>(s[*axis].value()));
    c.flops = static_cast<double>(out) * 5 * std::log2(len);
  }
  return c;
}

absl::Status InferSTFT(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}))
    return ctx.Error("expects a float signal, got ", DTypeName(x.dtype()));
  if (x.shape().ranked() && x.shape().rank() != 3)
    return ctx.Error("signal has rank ", x.shape().rank(), ", expected 3 [batch, length, 1 or 2]");
  bool onesided = ctx.node().GetInt("onesided", 1) != 0;
  Dim frame;
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    if (const Tensor* fl = ctx.const_input(3); fl && fl->numel() == 1) frame = Dim(fl->GetInt(0));
  } else if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& w = ctx.input_type(2);
    if (w.is_tensor() && w.shape().ranked() && w.shape().rank() == 1) frame = w.shape()[0];
  }
  Dim frames;
  const Tensor* step = ctx.const_input(1);
  if (x.shape().ranked() && x.shape()[1].is_static() && frame.is_static() && step && step->numel() == 1 &&
      step->GetInt(0) > 0 && frame.value() > 0 && frame.value() <= x.shape()[1].value())
    frames = Dim(1 + (x.shape()[1].value() - frame.value()) / step->GetInt(0));
  Dim bins = frame.is_static() ? Dim(onesided ? frame.value() / 2 + 1 : frame.value()) : Dim();
  Dim batch = x.shape().ranked() ? x.shape()[0] : Dim();
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape({batch, frames, bins, Dim(2)})));
  return absl::OkStatus();
}

absl::Status STFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float signal, got ", DTypeName(x.dtype()));
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return ctx.Error("signal must be [batch, length, 1 or 2], got ", DimsText(x.dims()));
  KILN_ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, ctx.input(1), "frame_step"));
  if (step < 1) return ctx.Error("frame_step must be positive, got ", step);
  const Tensor* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  int64_t frame = -1;
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(frame, ScalarInt(ctx, ctx.input(3), "frame_length"));
  }
  if (window) {
    if (window->rank() != 1 || !IsFloat(window->dtype()))
      return ctx.Error("window must be a 1-D float tensor, got ", DimsText(window->dims()));
    if (frame >= 0 && frame != window->dim(0))
      return ctx.Error("frame_length ", frame, " differs from the window length ", window->dim(0));
    frame = window->dim(0);
  }
  if (frame < 1) return ctx.Error("the frame length is unknown or not positive: give a window or frame_length");
  int64_t batch = x.dim(0), len = x.dim(1), comps = x.dim(2);
  if (frame > len) return ctx.Error("the frame length ", frame, " exceeds the signal length ", len);
  if (frame > kMaxSignalLength) return ctx.Error("the frame length ", frame, " is too large");
  bool onesided = ctx.node().GetInt("onesided", 1) != 0;
  if (onesided && comps == 2) return ctx.Error("onesided output needs a real signal; set onesided=0");
  int64_t frames = 1 + (len - frame) / step;
  int64_t bins = onesided ? frame / 2 + 1 : frame;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {batch, frames, bins, 2}));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), {batch, frames, bins, 2});
  std::vector<double> xs = ToDoubleVector(x);
  std::vector<double> w = window ? ToDoubleVector(*window) : std::vector<double>(frame, 1.0);
  Fourier f(frame, false);
  std::vector<Complex> a(frame);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t fr = 0; fr < frames; ++fr) {
        for (int64_t j = 0; j < frame; ++j) {
          const double* p = &xs[(b * len + fr * step + j) * comps];
          a[j] = Complex(p[0], comps == 2 ? p[1] : 0.0) * w[j];
        }
        f.Run(a);
        T* q = out + (b * frames + fr) * bins * 2;
        for (int64_t k = 0; k < bins; ++k) {
          q[2 * k] = FromDouble<T>(a[k].real());
          q[2 * k + 1] = FromDouble<T>(a[k].imag());
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status InferMelWeightMatrix(InferContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("output_datatype", 1));
  if (!dt || !IsNumeric(*dt)) return ctx.Error("output_datatype is not a numeric data type");
  Dim rows, cols;
  if (const Tensor* m = ctx.const_input(0); m && m->numel() == 1) cols = Dim(std::max<int64_t>(m->GetInt(0), 0));
  if (const Tensor* d = ctx.const_input(1); d && d->numel() == 1) rows = Dim(std::max<int64_t>(d->GetInt(0) / 2 + 1, 0));
  ctx.set_output(0, Type::Tensor(*dt, Shape({rows, cols})));
  return absl::OkStatus();
}

absl::Status MelWeightMatrix(KernelContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("output_datatype", 1));
  if (!dt || !IsNumeric(*dt)) return ctx.Error("output_datatype is not a numeric data type");
  KILN_ASSIGN_OR_RETURN(int64_t mel_bins, ScalarInt(ctx, ctx.input(0), "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, ctx.input(1), "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx, ctx.input(2), "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lower, ScalarFloat(ctx, ctx.input(3), "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upper, ScalarFloat(ctx, ctx.input(4), "upper_edge_hertz"));
  if (mel_bins < 1) return ctx.Error("num_mel_bins must be positive, got ", mel_bins);
  if (dft_length < 1) return ctx.Error("dft_length must be positive, got ", dft_length);
  if (sample_rate < 1) return ctx.Error("sample_rate must be positive, got ", sample_rate);
  if (!(lower >= 0 && upper >= lower && std::isfinite(upper)))
    return ctx.Error("edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz (finite)");
  int64_t spec_bins = dft_length / 2 + 1;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {spec_bins, mel_bins}));
  // Band edges on the mel scale, mapped back to spectrogram bins.
  float low_mel = 2595.f * std::log10(1.f + static_cast<float>(lower) / 700.f);
  float high_mel = 2595.f * std::log10(1.f + static_cast<float>(upper) / 700.f);
  float mel_step = (high_mel - low_mel) / static_cast<float>(mel_bins + 2);
  std::vector<int64_t> edge(mel_bins + 2);
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double mel = static_cast<double>(i) * mel_step + low_mel;
    double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!(std::fabs(bin) < 1e15)) return ctx.Error("the band edges fall outside any usable bin range");
    edge[i] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(spec_bins * mel_bins, 0.0);
  // Triangles, written only where they meet the spectrogram bins.
  for (int64_t i = 0; i < mel_bins; ++i) {
    int64_t lo = edge[i], center = edge[i + 1], hi = edge[i + 2];
    if (center == lo) {
      if (center >= 0 && center < spec_bins) w[center * mel_bins + i] = 1.0;
    } else {
      for (int64_t j = std::max<int64_t>(lo, 0); j <= std::min(center, spec_bins - 1); ++j)
        w[j * mel_bins + i] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
    }
    if (hi > center)
      for (int64_t j = std::max<int64_t>(center, 0); j < std::min(hi, spec_bins); ++j)
        w[j * mel_bins + i] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
  }
  Tensor& y = ctx.AllocOutput(0, *dt, {spec_bins, mel_bins});
  DispatchNumeric(*dt, [&]<typename T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < w.size(); ++i) out[i] = FromDouble<T>(w[i]);
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterSignalOps(OpRegistry& r) {
  r.Register("DFT").Inputs(1, 2).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("axis", AttrKind::kInt, "1")
      .Attr("inverse", AttrKind::kInt, "0")
      .Attr("onesided", AttrKind::kInt, "0")
      .Infer(InferDFT).Kernel(DFT).Cost(DftCost);
  r.Register("STFT").Inputs(2, 4).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("onesided", AttrKind::kInt, "1")
      .Infer(InferSTFT).Kernel(STFT).Cost(DftCost);
  r.Register("MelWeightMatrix").Inputs(5).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("output_datatype", AttrKind::kInt, "1 (f32)")
      .Infer(InferMelWeightMatrix).Kernel(MelWeightMatrix);
}

}  // namespace kiln
