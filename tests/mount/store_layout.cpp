// store_layout STORE: prints a store's chunk table as JSON, read through the
// library's StoreReader, for the mount tests (which need to know where a
// tensor's chunks are, and where to damage one) without parsing the format
// themselves.
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>

#include "ptwm/store/store_reader.hpp"

int main(int argc, char* argv[]) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: store_layout STORE\n");
        return 2;
    }
    try {
        auto reader = ptwm::StoreReader::open(argv[1]);
        nlohmann::json chunks = nlohmann::json::array();
        for (size_t i = 0; i < reader->chunk_count(); ++i) {
            const ptwm::ChunkEntry& c = reader->chunk(i);
            nlohmann::json payloads = nlohmann::json::array();
            for (unsigned p = 0; p < c.plane_count; ++p) payloads.push_back(c.payload_length[p]);
            chunks.push_back({{"original_offset", c.original_offset},
                              {"original_length", c.original_length},
                              {"stored_offset", c.stored_offset},
                              {"payload_lengths", payloads},
                              {"tensor", c.tensor},
                              {"raw", reader->chunk_is_raw(i)}});
        }
        nlohmann::json out = {{"original_size", reader->original_size()},
                              {"prefix_length", reader->prefix().size()},
                              {"chunks", chunks}};
        std::puts(out.dump().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "store_layout: %s\n", e.what());
        return 1;
    }
    return 0;
}
