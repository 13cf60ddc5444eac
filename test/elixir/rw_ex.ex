# The Elixir workload of test/integration/test_elixir.py: a GenServer
# called in a loop by two clients, and a process spinning in anonymous
# functions. Compiled with elixirc when the test runs.

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

defmodule RwEx do
  def start do
    {:ok, _} = RwEx.Counter.start_link(0)
    Enum.each(1..2, &RwEx.Client.start/1)
    RwEx.Spin.start()
    :ok
  end
end
