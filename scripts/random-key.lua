-- wrk script: each request for a random client out of KEYS, each wrk
-- thread drawing its own sequence (with one seed for all, the threads
-- sent the same keys in step, so every key came in pairs). Its arguments,
-- after wrk's "--":
--
--   KEYS METHOD PATH [BODY]
--
-- where "{key}" in PATH and BODY stands for the client's number; with a
-- BODY the request says it is JSON. With WRK_STATUSES=1 in its
-- environment it also counts the responses by status and prints them at
-- the end, as "statuses: 200=N 429=M": a check that the requests were
-- understood, at the cost of a Lua call per response (so not in the
-- rounds that are measured). Used by scripts/bench-loopback.sh and e2e's
-- BenchmarkAgainstOthers.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

-- split returns what comes before and after "{key}" in s (s and nil if
-- it has none).
local function split(s)
  local at = s:find("{key}", 1, true)
  if not at then
    return s, nil
  end
  return s:sub(1, at - 1), s:sub(at + 5)
end

-- fill is what split split, k in place of "{key}" if it had one.
local function fill(pre, post, k)
  if post then
    return pre .. k .. post
  end
  return pre
end

function init(args)
  keys = tonumber(args[1])
  method = args[2]
  path_pre, path_post = split(args[3])
  if args[4] then
    body_pre, body_post = split(args[4])
    headers = {["Content-Type"] = "application/json"}
  end
  math.randomseed(20260730 + id)
  if os.getenv("WRK_STATUSES") == "1" then
    statuses = {}
    response = function(status, headers, body)
      statuses[status] = (statuses[status] or 0) + 1
    end
  end
end

function done(summary, latency, requests)
  if os.getenv("WRK_STATUSES") ~= "1" then
    return
  end
  local all, codes = {}, {}
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("statuses") or {}) do
      if not all[status] then
        table.insert(codes, status)
      end
      all[status] = (all[status] or 0) + n
    end
  end
  table.sort(codes)
  io.write("statuses:")
  for _, status in ipairs(codes) do
    io.write(" " .. status .. "=" .. all[status])
  end
  io.write("\n")
end

request = function()
  local k = math.random(1, keys)
  if body_pre then
    return wrk.format(method, fill(path_pre, path_post, k), headers, fill(body_pre, body_post, k))
  end
  return wrk.format(method, fill(path_pre, path_post, k))
end
