#pragma once
// A store wrapper that authenticates what ranks publish. set() appends
// HMAC-SHA256(secret, "ringlet-record", key, value) to the value; get() checks it in constant
// time and strips it, and throws IoError naming the key and the store when it does not match: a
// value written without the job secret (a forged peer record, a relay's address put in place of
// a rank's), or moved from another key. The key in the MAC is the key this wrapper sees, so wrap
// the base store and put prefixes on top: the communicator's number is then covered too.
//
// add() and check() pass through unauthenticated: a counter is arithmetic done by the store
// itself. A forged counter can make setup fail or time out, never feed data to a collective.

#include <memory>
#include <string>

#include "ringlet/store.h"

namespace ringlet::store {

std::shared_ptr<Store> makeAuthenticatedStore(std::string secret, std::shared_ptr<Store> base);

}  // namespace ringlet::store
