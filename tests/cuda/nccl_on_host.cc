// nccl_on_host.cc - the NCCL calls a data-parallel package's launcher
// makes, over host memory, for tests/cuda/launcher_on_host_test.cc: the
// ranks of a communicator are host threads of one process (as
// kiln_model_run_replicas runs them), and each ncclAllReduce waits for
// every rank's call and writes each rank the sum or the mean of their
// buffers. f32 only, as the tests use. kiln_shim_allreduces() counts the
// calls.
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace {

struct Group {
  int ranks = 1;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  long generation = 0;
  std::vector<const float*> send;
  std::vector<float*> recv;
};

std::mutex counter_mu;
int allreduces = 0;

}  // namespace

struct ncclComm {
  std::shared_ptr<Group> group;
  int rank = 0;
};

extern "C" int kiln_shim_allreduces() {
  std::lock_guard<std::mutex> lock(counter_mu);
  return allreduces;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  auto group = std::make_shared<Group>();
  group->ranks = ndev;
  group->send.assign(ndev, nullptr);
  group->recv.assign(ndev, nullptr);
  for (int r = 0; r < ndev; ++r) comms[r] = new ncclComm{group, r};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "not on the host"; }

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  if (datatype != ncclFloat32 || (op != ncclAvg && op != ncclSum)) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(counter_mu);
    ++allreduces;
  }
  Group& g = *comm->group;
  std::unique_lock<std::mutex> lock(g.mu);
  g.send[comm->rank] = static_cast<const float*>(sendbuff);
  g.recv[comm->rank] = static_cast<float*>(recvbuff);
  const long generation = g.generation;
  if (++g.arrived < g.ranks) {
    g.cv.wait(lock, [&] { return g.generation != generation; });
    return ncclSuccess;
  }
  std::vector<float> result(count, 0.0f);
  for (int r = 0; r < g.ranks; ++r)
    for (size_t i = 0; i < count; ++i) result[i] += g.send[r][i];
  if (op == ncclAvg)
    for (float& v : result) v /= static_cast<float>(g.ranks);
  for (int r = 0; r < g.ranks; ++r) std::memcpy(g.recv[r], result.data(), count * sizeof(float));
  g.arrived = 0;
  ++g.generation;
  g.cv.notify_all();
  return ncclSuccess;
}
