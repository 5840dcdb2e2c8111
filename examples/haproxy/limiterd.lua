-- limiterd.lua: asks limiterd whether a request may proceed, for HAProxy
-- 2.6 (Debian 12's) and later.
--
--   global
--       lua-load limiterd.lua
--   frontend web
--       http-request set-var(txn.limiterd_key) src
--       http-request lua.limiterd 127.0.0.1:8080
--
-- The action GETs http://HOST:PORT/check?key=KEY, KEY being the variable
-- txn.limiterd_key (the client's address, src, when it is not set), and
-- leaves limiterd's answer in variables for the configuration to act on:
--
--   txn.limiterd_denied        true when limiterd answered 429
--   txn.limiterd_retry_after   its Retry-After (whole seconds)
--   txn.limiterd_ratelimit     its RateLimit field
--   txn.limiterd_policy        its RateLimit-Policy field
--
-- A field limiterd did not send (a key no rule governs) is left unset.
-- Answering the client is the configuration's: haproxy.cfg beside this file
-- turns txn.limiterd_denied into a 429 with the three fields.
--
-- limiterd down, unreachable, slower than timeout_s or answering anything
-- but 200 or 429: nothing is set, so the request goes on (fail open, as
-- limiterd itself does on an internal error), and a warning is logged.
--
-- It speaks HTTP/1.1 over core.tcp() rather than using core.httpclient():
-- in 2.6 the httpclient retries a refused connection three times, a second
-- apart, and neither that nor its connect timeout can be changed before
-- 2.9 (httpclient.retries, httpclient.timeout.connect), so a stopped
-- limiterd would add 3 s to every request. A socket fails at once on a
-- refused connection and within timeout_s otherwise.

-- Longest wait for limiterd to accept, then for each read or write, in
-- seconds.
local timeout_s = 0.5

-- Percent-encodes a key for the query string: keys are arbitrary text (an
-- IPv6 address has colons, a header value anything).
local function query_escape(s)
    return (string.gsub(s, "[^%w%-%._~]", function(c)
        return string.format("%%%02X", string.byte(c))
    end))
end

-- check asks limiterd at host:port about key. It returns the status and
-- the response's header fields (names lowercased, first value of each), or
-- nil and what went wrong.
local function check(host, port, key)
    local sock = core.tcp()
    sock:settimeout(timeout_s)
    local ok, err = sock:connect(host, port)
    if not ok then
        sock:close()
        return nil, "connect: " .. tostring(err)
    end
    local request = "GET /check?key=" .. query_escape(key) .. " HTTP/1.1\r\n" ..
        "Host: " .. host .. ":" .. port .. "\r\n" ..
        "Connection: close\r\n\r\n"
    local sent
    sent, err = sock:send(request)
    if sent == nil then
        sock:close()
        return nil, "send: " .. tostring(err)
    end
    local line
    line, err = sock:receive("*l")
    local status = line and tonumber(string.match(line, "^HTTP/1%.%d (%d%d%d)"))
    if status == nil then
        sock:close()
        return nil, "status line: " .. tostring(line or err)
    end
    local headers = {}
    -- The body is not needed: the decision and its fields are in the
    -- status and the header fields.
    for _ = 1, 100 do
        line, err = sock:receive("*l")
        if line == nil then
            sock:close()
            return nil, "header: " .. tostring(err)
        end
        if line == "" then
            break
        end
        local name, value = string.match(line, "^([^:]+):%s*(.-)%s*$")
        if name ~= nil then
            name = string.lower(name)
            if headers[name] == nil then
                headers[name] = value
            end
        end
    end
    sock:close()
    return status, headers
end

core.register_action("limiterd", { "http-req" }, function(txn, addr)
    local host, port = string.match(addr, "^%[?(.-)%]?:(%d+)$")
    if host == nil then
        txn:Warning("limiterd: " .. addr .. " is not HOST:PORT, request allowed")
        return
    end
    local key = txn:get_var("txn.limiterd_key")
    if key == nil or key == "" then
        key = txn.f:src()
    end
    local status, headers = check(host, tonumber(port), tostring(key))
    if status == nil then
        txn:Warning("limiterd at " .. addr .. " did not answer, request allowed: " .. headers)
        return
    end
    if status ~= 200 and status ~= 429 then
        -- A 400 is a key limiterd refuses (too long, not UTF-8): allowed
        -- and logged, so a bad key never locks a client out.
        txn:Warning("limiterd at " .. addr .. " answered " .. status .. ", request allowed")
        return
    end
    local fields = {
        ["txn.limiterd_ratelimit"] = headers["ratelimit"],
        ["txn.limiterd_policy"] = headers["ratelimit-policy"],
        ["txn.limiterd_retry_after"] = headers["retry-after"],
    }
    for name, value in pairs(fields) do
        txn:set_var(name, value)
    end
    if status == 429 then
        txn:set_var("txn.limiterd_denied", true)
    end
end, 1)
