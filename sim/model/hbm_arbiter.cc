//===- hbm_arbiter.cc - HBM, a fluid bandwidth arbiter --------------------===//
//
// HBM is a fluid bandwidth arbiter: the DMA transfers in flight share the
// chip's bandwidth max-min fairly, each capped by its pipe's own rate. Every
// start or finish re-plans the rates; one arbiter thread wakes at the next
// finish (one timed event however many transfers are in flight).
//
// There is no L2: every transfer is charged to HBM (the machine's
// l2_size_mib is only reported).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <limits>
#include <vector>

#include "sim/model/device_impl.h"

namespace kiln::sim {

void Device::Impl::HbmAdvance() {
  double now = Now(), dt = now - hbm_last;
  if (dt > 0)
    for (XferSlot& x : xfers) x.remaining -= x.rate * dt;
  hbm_last = now;
}

// Max-min fair rates (water-filling over the caps), then the next finish.
void Device::Impl::HbmReplan() {
  double total = 0;
  double sum_caps = 0, min_cap = 0;
  for (size_t i = 0; i < xfers.size(); ++i) {
    const double cap = xfers[i].cap;
    sum_caps += cap;
    min_cap = (i == 0 || cap < min_cap) ? cap : min_cap;
  }
  const double fair = xfers.empty() ? 0 : hbm_bw / static_cast<double>(xfers.size());
  if (sum_caps <= hbm_bw) {
    for (XferSlot& x : xfers) x.rate = x.cap;
    total = sum_caps;
  } else if (min_cap >= fair) {  // every transfer is held to an equal share
    for (XferSlot& x : xfers) x.rate = fair;
    total = hbm_bw;
  } else {
    std::vector<XferSlot*>& order = hbm_order;
    order.clear();
    for (XferSlot& x : xfers) order.push_back(&x);
    std::sort(order.begin(), order.end(), [](XferSlot* a, XferSlot* b) { return a->cap < b->cap; });
    double left = hbm_bw;
    size_t n = order.size();
    for (size_t i = 0; i < n; ++i) {
      XferSlot* x = order[i];
      x->rate = std::min(x->cap, left / static_cast<double>(n - i));
      left -= x->rate;
      total += x->rate;
    }
  }
  double next = -1;
  if (!xfers.empty() && sum_caps > hbm_bw && min_cap >= fair && fair > 0) {
    // One rate for all: the first finish is the least remaining over it
    // (division by a positive constant keeps the order, so this is the
    // same value as the least quotient).
    double least = std::numeric_limits<double>::infinity();
    for (const XferSlot& x : xfers) least = std::min(least, x.remaining);
    next = std::max(0.0, least) / fair;
  } else {
    for (const XferSlot& x : xfers) {
      double t = std::max(0.0, x.remaining) / x.rate;
      if (next < 0 || t < next) next = t;
    }
  }
  hbm_ev.cancel();
  if (next >= 0) hbm_ev.notify(Cycles(next));
  if (opt.trace && total != hbm_total) {
    hbm_total = total;
    trace.Count(Trace::kHbm, "HBM GB/s", Now(), total * machine.chip().clock_mhz() / 1e3, /*rate=*/true);
  }
}

// The arbiter: finishes the transfers that are done at each planned finish.
void Device::Impl::HbmMain() {
  while (true) {
    if (!WaitEvent(hbm_ev)) return;
    if (shutdown && xfers.empty()) return;
    HbmAdvance();
    bool any = false;
    for (size_t i = 0; i < xfers.size();) {
      XferSlot& x = xfers[i];
      if (x.remaining <= 1e-9 * x.bytes + 1e-6) {
        x.owner->finished = true;
        x.owner->done.notify();
        xfers[i] = xfers.back();
        xfers.pop_back();
        any = true;
      } else {
        ++i;
      }
    }
    if (any || !xfers.empty()) HbmReplan();
  }
}

bool Device::Impl::HbmTransfer(double bytes, double cap) {
  if (bytes <= 0) return true;
  Xfer x;
  HbmAdvance();
  xfers.push_back(XferSlot{bytes, bytes, cap, 0, &x});
  HbmReplan();
  while (!x.finished) {
    if (!WaitEvent(x.done)) {
      auto it = std::find_if(xfers.begin(), xfers.end(), [&](const XferSlot& s) { return s.owner == &x; });
      if (it != xfers.end()) xfers.erase(it);
      return false;
    }
  }
  return true;
}

}  // namespace kiln::sim
