-- Neovim's own LSP client (0.7 API) attached to `protocol-run lsp`: waits for diagnostics, fixes
-- the typo in the buffer, waits for them to clear, asks for completion and hover, writes JSON.
local server = os.getenv('PROTOCOL_RUN')
local file = os.getenv('PROTOCOL_FILE')
local result_file = os.getenv('RESULT_FILE')
local timeout = 20000
local results = {}

local function diagnostics_of(bufnr)
  local found = {}
  for _, diagnostic in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(found, {
      line = diagnostic.lnum,
      col = diagnostic.col,
      severity = diagnostic.severity,
      message = diagnostic.message,
    })
  end
  return found
end

local function has_error(bufnr)
  return #vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.ERROR }) > 0
end

local function request(bufnr, method, line, character)
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(bufnr),
    position = { line = line, character = character },
  }
  local responses, why = vim.lsp.buf_request_sync(bufnr, method, params, timeout)
  if not responses then
    error(method .. ': ' .. tostring(why))
  end
  for _, response in pairs(responses) do
    if response.err then
      error(method .. ': ' .. vim.inspect(response.err))
    end
    return response.result
  end
end

local ok, problem = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = 'protocol-run',
    cmd = { server, 'lsp' },
    root_dir = vim.fn.fnamemodify(file, ':h'),
  })
  assert(client_id, 'the client did not start')
  assert(vim.lsp.buf_attach_client(bufnr, client_id), 'the client did not attach')

  results.diagnostics_received = vim.wait(timeout, function() return has_error(bufnr) end, 20)
  results.diagnostics = diagnostics_of(bufnr)

  -- Fix the typo the way a user would, in the buffer, unsaved.
  local typo_line = tonumber(os.getenv('TYPO_LINE'))
  local text = vim.api.nvim_buf_get_lines(bufnr, typo_line, typo_line + 1, true)[1]
  local fixed = text:gsub('atempts', 'attempts')
  vim.api.nvim_buf_set_lines(bufnr, typo_line, typo_line + 1, true, { fixed })
  results.cleared = vim.wait(timeout, function() return not has_error(bufnr) end, 20)

  local completion = request(bufnr, 'textDocument/completion',
    tonumber(os.getenv('COMPLETE_LINE')), tonumber(os.getenv('COMPLETE_CHARACTER')))
  results.completion = {}
  for _, item in ipairs(completion and (completion.items or completion) or {}) do
    table.insert(results.completion, item.label)
  end

  local hover = request(bufnr, 'textDocument/hover',
    tonumber(os.getenv('HOVER_LINE')), tonumber(os.getenv('HOVER_CHARACTER')))
  results.hover = hover and hover.contents and hover.contents.value or ''
  vim.lsp.stop_client(client_id)
end)
if not ok then
  results.error = tostring(problem)
end
local output = io.open(result_file, 'w')
output:write(vim.fn.json_encode(results))
output:close()
vim.cmd('qall!')
