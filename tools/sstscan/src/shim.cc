// Every entry of one table file, in file order, through RocksDB's own reader:
// `NewTableIterator` returns deletion markers too, with internal keys.

#include <cstdlib>
#include <cstring>
#include <memory>

#include "rocksdb/options.h"
#include "rocksdb/sst_file_reader.h"

extern "C" {

typedef void (*rk_sst_entry)(void* context, const char* key, size_t key_length, const char* value,
                             size_t value_length);

// Calls `entry` for each entry of the file at `path`. Returns NULL, or an error
// message to release with `rk_sst_free`.
char* rk_sst_scan(const char* path, rk_sst_entry entry, void* context) {
  rocksdb::Options options;
  rocksdb::SstFileReader reader(options);
  rocksdb::Status status = reader.Open(path);
  if (!status.ok()) {
    return strdup(status.ToString().c_str());
  }
  std::unique_ptr<rocksdb::Iterator> entries = reader.NewTableIterator();
  for (entries->SeekToFirst(); entries->Valid(); entries->Next()) {
    rocksdb::Slice key = entries->key();
    rocksdb::Slice value = entries->value();
    entry(context, key.data(), key.size(), value.data(), value.size());
  }
  if (!entries->status().ok()) {
    return strdup(entries->status().ToString().c_str());
  }
  return nullptr;
}

void rk_sst_free(char* message) { free(message); }
}
