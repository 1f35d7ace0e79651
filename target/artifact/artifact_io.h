//===- artifact_io.h - Reading and writing .kiln artifacts ------*- C++ -*-===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/support/mapped_file.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::artifact {

// Bumped whenever the meaning of a field or the file's layout changes
// (version 3: the CRC-32 trailer; 4: data-parallel modules, whose
// collectives an older reader would skip; 5: programs' instructions packed
// as integers, sim/isa/isa.proto's Program.code, and the constants in a
// section of their own after the message).
inline constexpr uint32_t kArtifactFormatVersion = 5;

// Writes `artifact` (its `constants` as the file's section of constants,
// after the message: artifact.proto).
absl::Status WriteArtifact(Artifact artifact, const std::string& path);

// An artifact file as read: the message (its `constants` empty where the
// file holds them in a section) and the constants' bytes where they lie in
// the file's mapping, which `file` holds (copy-on-write: tensors may borrow
// the bytes, DeserializeBlobStore's `owner`).
struct ArtifactFile {
  Artifact message;
  std::shared_ptr<const MappedFile> file;
  absl::string_view section;  // empty: the constants are the message's own
  absl::string_view constants() const { return section.empty() ? absl::string_view(message.constants()) : section; }
};
// Rejects files that are not artifacts, are truncated or corrupted (the
// checksum covers every byte after the magic), or come from another format
// version, with a one-line reason.
absl::StatusOr<ArtifactFile> ReadArtifactFile(const std::string& path);
// The same with the constants copied into the message.
absl::StatusOr<Artifact> ReadArtifact(const std::string& path);

// The target an artifact file was compiled for, read from its first bytes
// alone (no checksum); empty when the file is not a kiln artifact.
std::string PeekArtifactTarget(const std::string& path);

// "batch=4" or "batch=2, seq=16": a gear of `bundle` by its symbols' values.
std::string GearLabel(const Artifact& bundle, const Gear& gear);

// The buffer of `module` whose bytes buffer `b` shares through its
// alias_of chain (b itself when it aliases none).
int RootBuffer(const NpusimModule& module, int b);

// The signature of a graph's inputs or outputs.
void FillSignatures(const Graph& graph, Artifact* artifact);
std::string DescribeSignature(const TensorSignature& s);

}  // namespace kiln::artifact
