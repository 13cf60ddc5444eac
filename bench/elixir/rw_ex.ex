# An Elixir workload (test/integration/test_elixir.py, docs/ELIXIR.md): a
# GenServer registered under its alias (RwEx.Counter) called in a loop by
# two clients, a process spinning in anonymous functions, a pool of
# workers labelled {:rw_pool, N} (proc_lib:set_label/1, OTP 27 and later;
# unlabelled before), and a pipeline of Tasks (Task.async_stream) each
# serving one request with Logger metadata request_id: "req-N".
# Compiled with elixirc when used: Debian's Elixir 1.14 runs on OTP 25
# and 27; OTP 29 refuses its .beam files.

defmodule RwEx.Counter do
  use GenServer

  def start_link(start), do: GenServer.start_link(__MODULE__, start, name: __MODULE__)

  def bump(n), do: GenServer.call(__MODULE__, {:bump, n})

  @impl true
  def init(start), do: {:ok, start}

  @impl true
  def handle_call({:bump, n}, _from, acc) do
    acc = Enum.reduce(1..20, acc, fn i, a -> crunch(a, i * n, 200) + 1 end)
    {:reply, acc, acc}
  end

  defp crunch(acc, _n, 0), do: acc
  defp crunch(acc, n, k), do: crunch(rem(acc * 7 + k * n, 1_000_003), n, k - 1)
end

defmodule RwEx.Client do
  def start(n), do: spawn(fn -> loop(n) end)

  def loop(n) do
    RwEx.Counter.bump(n)
    loop(n)
  end
end

defmodule RwEx.Spin do
  def start, do: spawn(fn -> run(0) end)

  def run(acc) do
    work = fn x -> burn(x, 5000) + 1 end
    acc = work.(acc)
    run(rem(acc, 1_000_003))
  end

  defp burn(x, 0), do: x
  defp burn(x, n), do: burn(rem(x * 31 + n, 1_000_003), n - 1)
end

defmodule RwEx.Pool do
  # Elixir 1.14 has no Process.set_label/1: proc_lib's, where the OTP has it
  def start(n), do: Enum.map(1..n, fn i -> spawn(fn -> init(i) end) end)

  defp init(i) do
    if function_exported?(:proc_lib, :set_label, 1) do
      apply(:proc_lib, :set_label, [{:rw_pool, i}])
    end

    work(i)
  end

  def work(i) do
    _ = churn(i, 20_000)
    receive do
    after
      1 -> work(i)
    end
  end

  defp churn(x, 0), do: x
  defp churn(x, n), do: churn(rem(x * 17 + n, 1_000_003), n - 1)
end

defmodule RwEx.Pipeline do
  require Logger

  # Requests in rounds of four, each served by a Task for about two
  # seconds: long enough to be selected and sampled.
  def start, do: spawn(fn -> loop(1) end)

  def loop(n) do
    n..(n + 3)
    |> Task.async_stream(&serve/1, max_concurrency: 4, timeout: :infinity)
    |> Stream.run()

    loop(n + 4)
  end

  def serve(id) do
    Logger.metadata(request_id: "req-#{id}")
    deadline = System.monotonic_time(:millisecond) + 2000
    step(id, deadline)
  end

  defp step(acc, deadline) do
    if System.monotonic_time(:millisecond) >= deadline do
      acc
    else
      step(handle(acc, 5000), deadline)
    end
  end

  defp handle(x, 0), do: x
  defp handle(x, n), do: handle(rem(x * 13 + n, 1_000_003), n - 1)
end

defmodule RwEx do
  def start do
    {:ok, _} = RwEx.Counter.start_link(0)
    Enum.each(1..2, &RwEx.Client.start/1)
    RwEx.Spin.start()
    :ok
  end

  # the GenServer and the Spin, plus the labelled pool and the pipeline
  def start_all do
    :ok = start()
    RwEx.Pool.start(3)
    RwEx.Pipeline.start()
    :ok
  end
end
