#include "sim/request.h"

#include <charconv>
#include <iterator>

namespace servesim {

std::string default_request_id(int64_t index) {
  char text[24] = {'r'};  // written in place: "r" + std::to_string() builds two strings
  return std::string(text, std::to_chars(text + 1, std::end(text), index).ptr);
}

uint64_t content_id(uint64_t salt, uint64_t n) {
  // splitmix64's finalizer over the salted number: a bijection, so ids of one kind never collide.
  uint64_t z = salt ^ (n + 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

const char* reject_cause_name(RejectCause cause) {
  switch (cause) {
    case RejectCause::kNone: return "";
    case RejectCause::kContextLength: return "context_length";
    case RejectCause::kKvCapacity: return "kv_capacity";
    case RejectCause::kBatchTokens: return "batch_tokens";
    case RejectCause::kParentRejected: return "parent";
  }
  return "";
}

}  // namespace servesim
