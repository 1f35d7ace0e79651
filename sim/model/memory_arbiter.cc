//===- memory_arbiter.cc - HBM and the L2, fluid bandwidth arbiters -------===//
//
// HBM and the L2 are each a fluid bandwidth arbiter: the transfers in
// flight share its bandwidth max-min fairly, each capped by its pipe's own
// rate. Every start or finish re-plans the rates; one arbiter thread wakes
// at the next finish (one timed event however many transfers are in
// flight). A DMA asks the L2 (l2_cache.h) which of its bytes it holds:
// those go through the L2's arbiter, the misses and the write-backs they
// cause through HBM's, both at once, and the DMA ends when both have.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <limits>
#include <vector>

#include "sim/model/device_impl.h"

namespace kiln::sim {

void Device::Impl::ArbAdvance(Arbiter& a) {
  double now = Now(), dt = now - a.last;
  if (dt > 0)
    for (XferSlot& x : a.xfers) x.remaining -= x.rate * dt;
  a.last = now;
}

// Max-min fair rates (water-filling over the caps), then the next finish.
void Device::Impl::ArbReplan(Arbiter& a) {
  std::vector<XferSlot>& xfers = a.xfers;
  double total = 0;
  double sum_caps = 0, min_cap = 0;
  for (size_t i = 0; i < xfers.size(); ++i) {
    const double cap = xfers[i].cap;
    sum_caps += cap;
    min_cap = (i == 0 || cap < min_cap) ? cap : min_cap;
  }
  const double fair = xfers.empty() ? 0 : a.bw / static_cast<double>(xfers.size());
  if (sum_caps <= a.bw) {
    for (XferSlot& x : xfers) x.rate = x.cap;
    total = sum_caps;
  } else if (min_cap >= fair) {  // every transfer is held to an equal share
    for (XferSlot& x : xfers) x.rate = fair;
    total = a.bw;
  } else {
    std::vector<XferSlot*>& order = a.order;
    order.clear();
    for (XferSlot& x : xfers) order.push_back(&x);
    std::sort(order.begin(), order.end(), [](XferSlot* p, XferSlot* q) { return p->cap < q->cap; });
    double left = a.bw;
    size_t n = order.size();
    for (size_t i = 0; i < n; ++i) {
      XferSlot* x = order[i];
      x->rate = std::min(x->cap, left / static_cast<double>(n - i));
      left -= x->rate;
      total += x->rate;
    }
  }
  double next = -1;
  if (!xfers.empty() && sum_caps > a.bw && min_cap >= fair && fair > 0) {
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
  a.ev.cancel();
  if (next >= 0) a.ev.notify(Cycles(next));
  if (opt.trace && total != a.total) {
    a.total = total;
    trace.Count(a.track, a.counter, Now(), total * machine.chip().clock_mhz() / 1e3, /*rate=*/true);
  }
}

// The arbiter: finishes the transfers that are done at each planned finish.
void Device::Impl::ArbMain(Arbiter& a) {
  while (true) {
    if (!WaitEvent(a.ev)) return;
    if (shutdown && a.xfers.empty()) return;
    ArbAdvance(a);
    bool any = false;
    for (size_t i = 0; i < a.xfers.size();) {
      XferSlot& x = a.xfers[i];
      if (x.remaining <= 1e-9 * x.bytes + 1e-6) {
        x.owner->finished = true;
        x.owner->done.notify();
        a.xfers[i] = a.xfers.back();
        a.xfers.pop_back();
        any = true;
      } else {
        ++i;
      }
    }
    if (any || !a.xfers.empty()) ArbReplan(a);
  }
}

void Device::Impl::ArbStart(Arbiter& a, double bytes, double cap, Xfer* x) {
  ArbAdvance(a);
  a.xfers.push_back(XferSlot{bytes, bytes, cap, 0, x});
  ArbReplan(a);
}

bool Device::Impl::Transfer(double hbm_bytes, double hbm_cap, double l2_bytes, double l2_cap) {
  Xfer parts[2];
  Arbiter* on[2] = {&hbm, &l2};
  const double bytes[2] = {hbm_bytes, l2_bytes}, caps[2] = {hbm_cap, l2_cap};
  for (int i = 0; i < 2; ++i) {
    if (bytes[i] > 0) ArbStart(*on[i], bytes[i], caps[i], &parts[i]);
    else parts[i].finished = true;
  }
  for (int i = 0; i < 2; ++i) {
    while (!parts[i].finished) {
      if (WaitEvent(parts[i].done)) continue;
      for (int j = 0; j < 2; ++j) {  // aborted: drop what is still in flight
        auto& xs = on[j]->xfers;
        auto it = std::find_if(xs.begin(), xs.end(), [&](const XferSlot& s) { return s.owner == &parts[j]; });
        if (it != xs.end()) xs.erase(it);
      }
      return false;
    }
  }
  return true;
}

}  // namespace kiln::sim
