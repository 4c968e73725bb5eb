// The prefix cache of a KV block manager (sim/kv_cache.h): which cached blocks hold a given
// content, and who holds them. A content is a full block's tokens together with every token before
// them in their sequence; it is named by a hash chained from the sequence's first block
// (hash_blocks below), and equal hashes are taken to be equal contents, as vLLM takes them. The
// copies of a content are the blocks registered with it and not evicted since, in registration
// order (vLLM's BlockHashToBlockMap); a lookup takes the first.
//
// Contents form a tree: a content's parent is the content of the block before it in the sequence.
// It is kept as a radix tree. A chunk is a run of contents that one sequence (its owner) registered
// at consecutive positions, each the parent of the next, kept as the array of their first copies'
// blocks; it hangs under the content before its first (or under the root). Only a chunk's first
// content is in a hash index (BlockHashIndex); the others are reached from their parent, and their
// hashes are computed only when a walk compares them, from a copy of the owner's prompt
// description. The blocks the owner registered it with are held by one sequence as a range, the
// chunk's hold (slots hold_from to its end), not one by one; other holders (sequences that claimed
// a cached block, or registered a copy) are counted per content, in per-slot state that only the
// chunks with such contents have. So registering the blocks a prompt computes costs no hash and no
// index entry per block, releasing them is one range, and evicting them pops them off their chunk's
// end: what a sequence costs follows what it shares with others, not how many blocks it computes.
// (A hash index entry, a reference count and free-queue links per block made a prefix-cached
// Mooncake replay about ten times slower than chunked prefill: bench/prefix_cache.py.)
//
// A content that has lost its copies stays in the tree while a content after it has one (a chunk is
// trimmed from its end only), so that a sequence registering it again finds its place; a walk stops
// at it, as a lookup of its hash would.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/block_hash_index.h"
#include "sim/request.h"

namespace servesim {

// The hash a block's chain starts from.
inline constexpr uint64_t kBlockHashSeed = 0x736572766573696dULL;

// What a block's hash is computed from: a prompt (its segments from segments[0], whose first token
// is the prompt's token `first_token`), then the output's content.
struct BlockContent {
  const Segment* segments = nullptr;
  int32_t num_segments = 0;
  int64_t first_token = 0;
  int32_t prompt_tokens = 0;
  uint64_t output_id = 0;
};

// Writes the hashes of blocks first_block, first_block + 1, ... (out.size() of them) of blocks of
// block_size tokens, the first chained from `prev` (the hash of block first_block - 1, or
// kBlockHashSeed). Each block's hash chains the previous one with the (content id, offset, length)
// pieces it covers; never 0. REQUIRES: the content holds token first_block * block_size.
void hash_blocks(const BlockContent& content, int32_t block_size, int64_t first_block,
                 uint64_t prev, std::span<uint64_t> out);

// Extends seq.block_hashes to at least `num_blocks` hashes (hash_blocks over seq's content).
void hash_sequence_blocks(Sequence& seq, int32_t block_size, size_t num_blocks);

class PrefixTree {
 public:
  static constexpr int32_t kNone = -1;
  // A content in the tree: slot `slot` of chunk `chunk`; the root (before any block) has chunk
  // kRootChunk, and no content chunk kNone.
  struct Node {
    int32_t chunk = kNone;
    int32_t slot = 0;
    bool valid() const { return chunk != kNone; }
    bool operator==(const Node&) const = default;
  };
  static constexpr int32_t kRootChunk = -2;
  static constexpr Node kRoot{kRootChunk, 0};

  // A copy of a content after its first (two sequences computed it side by side; rare).
  struct Copy {
    int32_t block = kNone;
    int32_t ref = 0;         // sequences holding it
    int64_t queued = kNone;  // its entry in the block manager's free queue, while nobody holds it
  };
  // A content's state beyond its first copy's block, in the chunks that need it.
  struct SlotState {
    int32_t ref = 0;         // holders of its first copy, beside the chunk's hold
    int32_t branches = 0;    // chunks hanging under it
    int32_t more = 0;        // copies after the first (see copies())
    bool out = false;        // its first copy left the free queue's range that covers it
    int64_t queued = kNone;  // its first copy's own entry in the free queue, while nobody holds it
  };
  // A chunk's hold: slots from..to - 1, whose first copies `holder` holds (the blocks its owner
  // registered them with; see above).
  struct Hold {
    const Sequence* holder = nullptr;
    int32_t from = 0, to = 0;
  };

  explicit PrefixTree(int32_t block_size) : block_size_(block_size) {}

  // Contents with at least one copy.
  int64_t size() const { return size_; }
  // Changes whenever a content gains or loses its copies, or the tree its shape.
  uint64_t version() const { return version_; }

  // The content of seq's block `pos` if the tree holds it, as a child of `parent` (the content of
  // seq's block pos - 1, or kRoot for pos 0), with or without copies; else an invalid Node.
  // Computes seq's block hashes as far as a comparison needs them.
  Node child(Node parent, Sequence& seq, int32_t pos);

  // Appends to `path` the contents of seq's blocks path.size(), path.size() + 1, ... while the
  // tree holds them with a copy, up to max_blocks in all (a lookup: path holds its hits so far).
  void walk(Sequence& seq, int32_t max_blocks, std::vector<Node>& path);

  // n's first copy's block (what a lookup takes), or kNone. REQUIRES (for all taking a Node): n
  // valid, not the root.
  int32_t first_block(Node n) const { return chunk(n).blocks[static_cast<size_t>(n.slot)]; }
  // Holders of n's first copy.
  int32_t ref(Node n) const {
    const Chunk& c = chunk(n);
    const int32_t held = c.holder != nullptr && n.slot >= c.hold_from ? 1 : 0;
    return c.states.empty() ? held : held + c.states[static_cast<size_t>(n.slot)].ref;
  }
  // n's state, or null when its chunk keeps none.
  const SlotState* find_state(Node n) const {
    const Chunk& c = chunk(n);
    return c.states.empty() ? nullptr : &c.states[static_cast<size_t>(n.slot)];
  }
  // n's state (its chunk's states made if it had none).
  SlotState& state(Node n);
  // The copy in `block` of n, after its first. REQUIRES: there is one.
  Copy& later_copy(Node n, int32_t block);

  // Registers `block` as n's newest copy (its first, if n has none), held by one sequence.
  void add_copy(Node n, int32_t block);
  // Adds seq's blocks pos, pos + 1, ... (blocks.size() of them, the i-th held in blocks[i]) as new
  // contents after `parent`, in the hold of seq, and returns the first; the i-th is {first.chunk,
  // first.slot + i}. REQUIRES: child(parent, seq, pos) is invalid.
  Node extend(Node parent, Sequence& seq, int32_t pos, std::span<const int32_t> blocks);
  // Ends the hold of n's chunk (n is in it) and returns what it was.
  Hold release_hold(Node n);
  // Passes the holds of `runs` (a sequence's) from `from` to `to`.
  void pass_holds(std::span<const BlockRun> runs, const Sequence& from, const Sequence& to);

  // Evicts n's first copy (nobody holds it): the next copy becomes the first, with its holders and
  // queue entry, or n is left without copies (and leaves the tree if nothing comes after it).
  void evict_first(Node n);
  // Evicts the copy in `block` of n, not its first.
  void evict_later(Node n, int32_t block);
  // Whether slots from..to of `chunk` can be evicted by evict_run: no state kept for them.
  bool plain_run(int32_t chunk) const { return chunks_[static_cast<size_t>(chunk)].states.empty(); }
  // Evicts the first copies of slots `to` down to `from` of `chunk`, each its only copy and held by
  // nobody, appending their blocks to `out` in that order. REQUIRES: plain_run(chunk).
  void evict_run(int32_t chunk, int32_t from, int32_t to, std::vector<int32_t>& out);

 private:
  // The sequence that registered a chunk, which alone may append to it.
  struct Owner {
    const Sequence* seq = nullptr;
    const Segment* segments = nullptr;
    int32_t index = 0;
    uint64_t output_id = 0;
    bool operator==(const Owner&) const = default;
  };
  struct Chunk {
    Node parent;
    Owner owner;
    const Sequence* holder = nullptr;  // the hold: slots hold_from.. (none without a holder)
    int32_t hold_from = 0;
    int64_t first_block = 0;        // the sequence position of slot 0
    std::vector<int32_t> blocks;    // slot i's first copy, or kNone
    std::vector<SlotState> states;  // empty, or one per slot
    std::vector<uint64_t> hashes;   // slot i's hash, for the first hashes.size() slots (>= 1)
    // What the hashes are computed from: the owner's prompt from the segment holding slot 0's
    // first token (the prompt's token first_token) on, and its output's content.
    std::vector<Segment> segments;
    int64_t first_token = 0;
    int32_t prompt_tokens = 0;
    uint64_t output_id = 0;
  };

  static uint64_t key(Node n) {
    return static_cast<uint64_t>(n.chunk) << 32 | static_cast<uint32_t>(n.slot);
  }
  static Owner owner_of(const Sequence& seq) {
    return {&seq, seq.prompt_segments, seq.index, seq.output_id};
  }
  Chunk& chunk(Node n) { return chunks_[static_cast<size_t>(n.chunk)]; }
  const Chunk& chunk(Node n) const { return chunks_[static_cast<size_t>(n.chunk)]; }
  uint64_t chunk_hash(Chunk& c, size_t slot);
  uint64_t sequence_hash(Sequence& seq, int32_t pos);
  Node new_chunk(Node parent, Sequence& seq, int32_t pos, std::span<const int32_t> blocks);
  void lose_last_copy(Node n);  // n has no copy left
  void trim(int32_t chunk);     // pops trailing contents without copies or children, upwards

  const int32_t block_size_;
  std::vector<Chunk> chunks_;
  std::vector<int32_t> free_chunks_;  // ids of deleted chunks, for reuse
  BlockHashIndex heads_;              // a chunk's first content's hash -> the chunk
  // Copies after the first, by key(n), in registration order.
  std::unordered_map<uint64_t, std::vector<Copy>> later_copies_;
  int64_t size_ = 0;
  uint64_t version_ = 0;
};

}  // namespace servesim
