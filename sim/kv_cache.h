// The paged KV block manager of one replica, as vLLM's (vllm/v1/core: KVCacheManager, BlockPool,
// FreeKVCacheBlockQueue): KV memory is a fixed number of blocks of `block_size` tokens; a sequence
// holds a block table that grows as its tokens are computed.
//
// Policies ask it for room (can_allocate / allocate) and give room back (free); they never count
// bytes themselves. Blocks nobody holds are free. Allocation takes blocks that hold no cached
// content first (never used, or freed without a hash), and only then evicts cached blocks, least
// recently freed first. That is vLLM's free queue since 0.33 (BlockPool.free_blocks prepends freed
// blocks without a hash and appends hashed ones); with FreeOrder::kFifo, as vLLM 0.11, every freed
// block joins the queue's tail in the order freed, and a hashless block freed late is taken after
// cached blocks freed before it.
//
// With prefix caching (vLLM's automatic prefix caching), a full block is identified by a hash chained
// from the sequence's first block over its content (Sequence::prompt_segments, output_id). A block is
// registered in the cache when the allocation that will fill it is made, i.e. when the iteration
// that computes it is scheduled, so a request admitted later in that iteration already reuses it. A
// new sequence reuses the longest run of cached leading blocks (cached_prefix_tokens). Several
// blocks may hold the same hash (two requests that computed the same prefix side by side); a lookup
// finds the one registered first, and evicting one copy leaves the others cached (vLLM's
// BlockHashToBlockMap). A freed block keeps its hash and can still be hit until it is taken for reuse
// (LRU eviction). A sequence frees its blocks tail first, so its tail is evicted before its head.
// The cached contents are indexed by a radix tree (sim/prefix_tree.h), so that a block that nobody
// shares costs neither a hash nor an index entry.
//
// With an unlimited cache (the unit backend without kv.blocks) ids are handed out fresh, cached
// blocks are never evicted, and nothing is preallocated: the cost of an operation never depends on
// the cache's size.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/free_block_queue.h"
#include "sim/kv_groups.h"
#include "sim/prefix_tree.h"
#include "sim/request.h"

namespace servesim {

// Where a freed block waits for reuse (see above).
enum class FreeOrder : uint8_t {
  kHashlessFirst,  // vLLM >= 0.33: blocks without a hash are reused before any cached block
  kFifo,           // vLLM 0.11: all freed blocks in the order freed
};

class BlockManager {
 public:
  static constexpr int64_t kUnlimited = -1;

  // REQUIRES: block_size >= 1; num_blocks >= 0 or kUnlimited; groups.any() only without prefix
  // caching.
  BlockManager(int32_t block_size, int64_t num_blocks, bool prefix_caching = false,
               FreeOrder free_order = FreeOrder::kHashlessFirst, KvGroups groups = {});

  int32_t block_size() const { return block_size_; }
  bool unlimited() const { return total_ == kUnlimited; }
  bool prefix_caching() const { return prefix_caching_; }
  // A hybrid layout (KvGroups::any): grouped decodes and leaps are off.
  bool hybrid() const { return hybrid_; }
  const KvGroups& groups() const { return groups_; }
  // Total blocks, or kUnlimited.
  int64_t num_total() const { return total_; }
  // Blocks held by at least one sequence (in every group).
  int64_t num_used() const { return used_ + hybrid_used_; }
  // Blocks that an allocation may take (cached blocks nobody holds included); very large when
  // unlimited.
  int64_t num_free() const {
    if (unlimited()) return std::numeric_limits<int32_t>::max() - used_ - hybrid_used_;
    return (total_ - next_fresh_) + queued_ + static_cast<int64_t>(spare_.size()) - hybrid_used_;
  }
  // Distinct cached contents (hashes) that a new sequence could hit, held or not.
  int64_t num_cached() const { return tree_.size(); }

  // Blocks needed to hold `tokens` (>= 0) tokens.
  int64_t blocks_for(int64_t tokens) const {
    return block_shift_ >= 0 ? (tokens + block_size_ - 1) >> block_shift_ : (tokens + block_size_ - 1) / block_size_;
  }
  // True if a sequence of `tokens` tokens could fit in an empty cache.
  bool fits_at_all(int64_t tokens) const {
    return unlimited() || (hybrid_ ? hybrid_need_new(tokens, true) : blocks_for(tokens)) <= total_;
  }

  // Prefix caching: how many of seq's leading tokens are in cached blocks, in whole blocks, and at
  // most num_tokens - 1 (a full hit still recomputes its last block, so that the forward pass has a
  // token to produce the next one from). 0 without prefix caching. Computes seq's block hashes as
  // needed. REQUIRES: seq holds no blocks.
  int32_t cached_prefix_tokens(Sequence& seq);

  // True if seq can grow to hold `num_tokens` tokens in total, its first `num_cached_tokens` taken
  // from the cache (the value cached_prefix_tokens returned, or 0).
  bool can_allocate(const Sequence& seq, int64_t num_tokens, int32_t num_cached_tokens = 0) const;
  // Grows seq's block table to hold `num_tokens` tokens, first claiming the cached blocks of its
  // first `num_cached_tokens` tokens, and registers in the cache every block that these tokens fill.
  // Returns false, changing nothing, if there are not enough free blocks.
  // REQUIRES: num_cached_tokens is 0, or cached_prefix_tokens(seq) just returned it.
  bool allocate(Sequence& seq, int64_t num_tokens, int32_t num_cached_tokens = 0) {
    // The common decode steps, inline: the last block still has room, or the token opens a block
    // and a freed block without a hash is at hand (taken as allocate_blocks would take it).
    if (num_cached_tokens == 0 && !prefix_caching_ && !hybrid_) {
      const int64_t room = static_cast<int64_t>(seq.block_table.size()) * block_size_;
      if (num_tokens <= room) return true;
      if (num_tokens <= room + block_size_ && plain_ && !spare_.empty() && !seq.block_table.empty()) {
        seq.block_table.push_back(spare_.back());
        spare_.pop_back();
        ++used_;
        return true;
      }
    }
    return allocate_blocks(seq, num_tokens, num_cached_tokens);
  }
  // Returns seq's blocks: with prefix caching tail first, and cached ones stay cached until
  // evicted; without, in the table's order (which block is reused next changes no result). Safe on
  // a sequence that holds none.
  void free(Sequence& seq);

  // Moves the blocks `from` holds to `to`, which holds none and will only free them (a
  // disaggregated prefill's blocks, held until their KV has moved).
  void hand_over(Sequence& from, Sequence& to);

 private:
  static constexpr int32_t kNone = -1;
  using Node = PrefixTree::Node;
  // An entry of the free queue: one block (and its content, if cached), or (block kRange) the
  // blocks of slots `top` down to node.slot of chunk node.chunk, released together by a hold.
  struct Queued {
    int32_t block;
    Node node;
    int32_t top = 0;
  };
  static constexpr int32_t kRange = -2;

  bool allocate_blocks(Sequence& seq, int64_t num_tokens, int32_t num_cached_tokens);

  // Hybrid layouts (kv_cache_hybrid.cc).
  int64_t skipped_window_blocks(int64_t computed) const;
  void release_skipped(Sequence& seq);  // vLLM's remove_skipped_blocks
  // Blocks every group needs for seq to hold num_tokens (admission: windowed groups capped).
  int64_t hybrid_need(const Sequence& seq, int64_t num_tokens, bool admission) const;
  int64_t hybrid_need_new(int64_t num_tokens, bool admission) const;
  bool allocate_hybrid(Sequence& seq, int64_t num_tokens);
  void free_hybrid(Sequence& seq);
  void take_blocks(Sequence& seq, int64_t num_blocks);  // grows seq's table to num_blocks
  // Takes `count` blocks off the free queue's head onto seq's table, evicting what they cache.
  void take_queued(Sequence& seq, int64_t count);
  // Empties seq's table and keeps its room for a later sequence's first blocks.
  void keep_table(Sequence& seq);
  void compact_queue();                  // after changes of the queue (FreeBlockQueue)

  // Prefix caching (kv_cache_prefix.cc).
  // The contents of seq's first num_blocks blocks, each cached (num_blocks * block_size is what
  // cached_prefix_tokens(seq) returned): its walk, kept while the tree has not changed.
  const std::vector<Node>& hit_path(const Sequence& seq, int32_t num_blocks) const;
  int64_t evictable_hits(const Sequence& seq, int32_t num_cached_tokens) const;
  void claim_cached(Sequence& seq, int32_t cached_blocks);  // the first copies of seq's hits
  void register_blocks(Sequence& seq, size_t num_blocks);   // caches seq's blocks up to num_blocks
  void free_cached(Sequence& seq);                          // free(), with prefix caching
  void release(int32_t block, Node node);                   // a block held one by one
  void release_hashless(int32_t block);                     // a block not registered
  static void append_run(Sequence& seq, Node first, int32_t count, bool hold);  // to block_runs
  void release_hold(Node first, int32_t last);               // a hold's slots first..last, ended

  const int32_t block_size_;
  const int32_t block_shift_;  // log2(block_size_) when a power of two, else -1
  const int64_t total_;
  const bool prefix_caching_;
  const FreeOrder free_order_;
  // Without prefix caching, when freed blocks go back to spare_ (hashless first, or unlimited):
  // blocks move between spare_ and the block tables in bulk.
  const bool plain_;
  const KvGroups groups_;
  const bool hybrid_;
  int64_t hybrid_used_ = 0;  // blocks held by the groups besides the first
  int64_t used_ = 0;
  int32_t next_fresh_ = 0;  // ids below this have been handed out at least once
  // Freed blocks that wait for reuse, least recently freed first: cached ones (kHashlessFirst), or
  // all (kFifo). Never with an unlimited cache, whose cached blocks stay cached. queued_ counts the
  // blocks in it.
  FreeBlockQueue<Queued> queue_;
  int64_t queued_ = 0;
  std::vector<int32_t> spare_;     // freed blocks without a hash, reused first (kHashlessFirst, or
                                   // unlimited)
  // The cached contents, with their copies' holders and places in queue_ (mutable: walks memoize
  // hashes). Without prefix caching a block has one holder, its sequence, and none is counted.
  mutable PrefixTree tree_;
  // The last walk of cached_prefix_tokens: for whom, at which version of the tree, and its nodes.
  mutable const Sequence* path_seq_ = nullptr;
  mutable uint64_t path_version_ = 0;
  mutable std::vector<Node> path_;
  // The room of freed sequences' tables, for the next sequences' first blocks: a table then takes
  // no allocation unless it grows past those before it. As many are kept as the replica ever ran
  // at once (max_num_seqs, and those preempted), and at most kKeptTables.
  std::vector<std::vector<int32_t>> kept_tables_;
  std::vector<std::vector<BlockRun>> kept_runs_;  // the same for block_runs
  static constexpr size_t kKeptTables = 1024;
};

}  // namespace servesim
